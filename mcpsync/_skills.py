"""Skills served by an MCP server: the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

A server that declares the extension lists its skills with ``skills/list``: per skill, the URI
of its ``SKILL.md``, the frontmatter of that file (as JSON) and a manifest of every file of the
skill with its SHA-256 ``digest`` and ``size`` in bytes. The files themselves are ordinary
resources, read with ``resources/read``.

mcpsync reads nothing ahead of need: :meth:`Client.list_skills` reads only the listing;
:meth:`Client.read_skill` loads one skill (reads its ``SKILL.md``); each other file is read
when :meth:`Skill.read` asks for it. Every file is checked against the manifest before it is
handed out: its size, its digest and, for ``SKILL.md``, its YAML frontmatter compared field by
field with the frontmatter the listing declared. A mismatch raises :class:`SkillIntegrityError`
and the content is not returned (nor kept).

Example:
    >>> for info in client.list_skills():                        # doctest: +SKIP
    ...     print(info.name, info.description)
    >>> skill = client.read_skill("pdf-processing")              # reads and checks SKILL.md
    >>> skill.body                                               # the instructions
    >>> skill.read_text("references/FORMS.md")                   # read and checked on demand
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from ._constants import SKILLS_EXTENSION
from ._errors import INVALID_PARAMS, ProtocolError, ResourceNotFound, SkillIntegrityError
from ._paging import paginate

__all__ = ["SKILLS_EXTENSION", "SkillFile", "SkillInfo", "Skill", "list_skills", "read_skill", "parse_frontmatter"]

#: the extension's identifier in the server's ``capabilities.extensions``.
ENTRY = "SKILL.md"
_FRONTMATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill as the server's manifest declares it.

    Attributes:
        uri: the resource URI the file is read from.
        path: the path relative to the skill's root (``SKILL.md``, ``references/FORMS.md``).
        digest: the declared digest, ``sha256:<hex>``.
        size: the declared size in bytes.
    """

    uri: str
    path: str
    digest: str
    size: int


@dataclass(frozen=True, slots=True)
class SkillInfo:
    """A skill as ``skills/list`` declares it (nothing of it has been read).

    Attributes:
        uri: the URI of its ``SKILL.md``.
        name: its name (the frontmatter's ``name``, else the directory holding ``SKILL.md``).
        description: the frontmatter's ``description`` (empty when absent).
        frontmatter: the declared frontmatter, field by field.
        files: the manifest: every file with its digest and size.
    """

    uri: str
    name: str
    description: str
    frontmatter: Mapping[str, Any] = field(repr=False)
    files: tuple[SkillFile, ...] = field(repr=False)

    @property
    def root(self) -> str:
        """The URI prefix of the skill's files (the ``SKILL.md`` URI without its file name)."""
        return self.uri[: -len(ENTRY)] if self.uri.endswith(ENTRY) else self.uri.rsplit("/", 1)[0] + "/"

    @classmethod
    def from_wire(cls, entry: Any) -> "SkillInfo":
        """Build one from a ``skills/list`` entry.

        Raises:
            ProtocolError: the entry lacks its URI, or a manifest item its digest or size.
        """
        if not isinstance(entry, Mapping) or not isinstance(entry.get("uri"), str):
            raise ProtocolError(f"skills/list entry without a uri: {entry!r:.200}")
        uri = entry["uri"]
        front = entry.get("frontmatter") or {}
        if not isinstance(front, Mapping):
            raise ProtocolError(f"skill {uri}: frontmatter is not an object")
        root = uri[: -len(ENTRY)] if uri.endswith(ENTRY) else uri.rsplit("/", 1)[0] + "/"
        files = []
        for item in entry.get("resources") or ():
            if not isinstance(item, Mapping) or not isinstance(item.get("uri"), str):
                raise ProtocolError(f"skill {uri}: a manifest item without a uri")
            digest, size = item.get("digest"), item.get("size")
            if not isinstance(digest, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ProtocolError(f"skill {uri}: manifest item {item['uri']} lacks a valid digest or size")
            path = item["uri"][len(root):] if item["uri"].startswith(root) else item["uri"]
            files.append(SkillFile(item["uri"], path, digest, size))
        name = front.get("name")
        if not isinstance(name, str) or not name:
            name = root.rstrip("/").rsplit("/", 1)[-1]
        description = front.get("description")
        return cls(uri, name, description if isinstance(description, str) else "", dict(front), tuple(files))

    def file(self, path_or_uri: str) -> SkillFile:
        """The manifest item for a relative path or a URI.

        Raises:
            SkillIntegrityError: the manifest does not list it (so it could not be verified).
        """
        for f in self.files:
            if path_or_uri in (f.path, f.uri):
                return f
        raise SkillIntegrityError(
            f"skill {self.name!r}: {path_or_uri} is not in the manifest the server declared; not read",
            uri=path_or_uri, check="manifest", expected=None, actual=None,
        )


class Skill:
    """A loaded skill: its ``SKILL.md`` was read and checked; its other files are read on demand.

    Thread-safe. Verified contents are kept, so a file is read from the server at most once.

    Attributes:
        info: the :class:`SkillInfo` it was loaded from.
        text: the whole ``SKILL.md``.
        frontmatter: the frontmatter parsed from ``SKILL.md`` (equal to the declared one).
        body: ``SKILL.md`` after its frontmatter: the instructions.
    """

    def __init__(self, client: Any, info: SkillInfo, *, timeout: float | None = None) -> None:
        self.info = info
        self._client = client
        self._timeout = timeout
        self._lock = threading.Lock()
        self._cache: dict[str, bytes] = {}
        entry = info.file(info.uri)
        data = self._fetch(entry)
        text = data.decode("utf-8", errors="strict")
        parsed, body = parse_frontmatter(text)
        _compare_frontmatter(info, parsed)
        self.text = text
        self.frontmatter = parsed
        self.body = body
        with self._lock:
            self._cache[entry.uri] = data

    def __repr__(self) -> str:
        return f"Skill({self.info.name!r}, {len(self.info.files)} files)"

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def entry(self) -> str:
        """The relative path of the entry file, ``SKILL.md``."""
        return self.info.file(self.info.uri).path

    @property
    def files(self) -> list[str]:
        """The relative paths of every file of the skill (``SKILL.md`` included)."""
        return [f.path for f in self.info.files]

    def read(self, path: str) -> bytes:
        """The bytes of one file (a relative path or its URI), read now if not read before.

        Raises:
            SkillIntegrityError: the file is not in the manifest, or its size or digest differs
                from the declared one (the content is discarded).
        """
        item = self.info.file(path)
        with self._lock:
            cached = self._cache.get(item.uri)
        if cached is not None:
            return cached
        data = self._fetch(item)
        with self._lock:
            self._cache[item.uri] = data
        return data

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """:meth:`read`, decoded."""
        return self.read(path).decode(encoding)

    def _fetch(self, item: SkillFile) -> bytes:
        result = self._client.read_resource(item.uri, timeout=self._timeout, refresh=True)
        contents = [c for c in result.contents if c.uri in (item.uri, "")] or list(result.contents)
        if len(contents) != 1:
            raise ProtocolError(f"resources/read of {item.uri} returned {len(contents)} contents, not one file")
        c = contents[0]
        data: bytes
        if c.text is not None:
            data = c.text.encode("utf-8")
        elif c.blob is not None:
            try:
                data = base64.b64decode(c.blob, validate=True)
            except ValueError:
                raise ProtocolError(f"resources/read of {item.uri}: the blob is not base64") from None
        else:
            data = b""
        verify_file(item, data)
        return data


def verify_file(item: SkillFile, data: bytes) -> None:
    """Check ``data`` against the manifest item: size first, then the digest.

    Raises:
        SkillIntegrityError: a mismatch, or a digest algorithm other than sha256.
    """
    if len(data) != item.size:
        raise SkillIntegrityError(
            f"{item.uri}: {len(data)} bytes, the server declared {item.size}; content refused",
            uri=item.uri, check="size", expected=item.size, actual=len(data),
        )
    algorithm, _, expected = item.digest.partition(":")
    if algorithm.lower() != "sha256" or not expected:
        raise SkillIntegrityError(
            f"{item.uri}: unsupported digest {item.digest!r:.40} (only sha256:<hex> is verified); content refused",
            uri=item.uri, check="digest", expected=item.digest, actual=None,
        )
    actual = hashlib.sha256(data).hexdigest()
    if not hmac.compare_digest(actual, expected.lower()):
        raise SkillIntegrityError(
            f"{item.uri}: sha256 {actual} differs from the declared {expected}; content refused",
            uri=item.uri, check="digest", expected=item.digest, actual="sha256:" + actual,
        )


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split a ``SKILL.md`` into its YAML frontmatter (a mapping) and its body.

    Raises:
        SkillIntegrityError: the frontmatter is missing or not a YAML mapping.
    """
    m = _FRONTMATTER.match(text)
    if m is None:
        raise SkillIntegrityError(
            "SKILL.md has no YAML frontmatter", uri=None, check="frontmatter", expected=None, actual=None
        )
    block, body = m.group(1), text[m.end():]
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML, when installed: the whole of YAML
    except ImportError:
        parsed: Any = _simple_yaml(block)
    else:
        try:
            parsed = yaml.safe_load(block)
        except yaml.YAMLError as exc:
            raise SkillIntegrityError(
                f"SKILL.md frontmatter is not valid YAML: {exc}", uri=None, check="frontmatter", expected=None, actual=None
            ) from None
    if parsed is None:
        parsed = {}
    if not isinstance(parsed, dict):
        raise SkillIntegrityError(
            "SKILL.md frontmatter is not a mapping", uri=None, check="frontmatter", expected=None, actual=None
        )
    return parsed, body


def _simple_yaml(block: str) -> dict[str, Any]:
    """Flat ``key: value`` frontmatter without PyYAML (plain or quoted scalars)."""
    out: dict[str, Any] = {}
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or line[:1].isspace():
            raise SkillIntegrityError(
                "SKILL.md frontmatter is more than flat key: value pairs and PyYAML is not installed",
                uri=None, check="frontmatter", expected=None, actual=None,
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = {"true": True, "false": False}.get(value, value)
    return out


def _compare_frontmatter(info: SkillInfo, parsed: Mapping[str, Any]) -> None:
    declared = info.frontmatter
    for key in sorted(set(declared) | set(parsed)):
        if key not in parsed or key not in declared or _normal(parsed[key]) != _normal(declared[key]):
            raise SkillIntegrityError(
                f"skill {info.name!r}: SKILL.md frontmatter field {key!r} is {parsed.get(key)!r:.80}, "
                f"the server declared {declared.get(key)!r:.80}; skill not loaded",
                uri=info.uri, check="frontmatter", expected=declared.get(key), actual=parsed.get(key),
            )


def _normal(value: Any) -> Any:
    """YAML scalars that JSON carries as strings (dates) compare by their text."""
    if isinstance(value, Mapping):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def list_skills(client: Any, timeout: float | None = None) -> list[SkillInfo]:
    """Every skill ``client``'s server lists (``skills/list``, following ``nextCursor``). Reads no file.

    Raises:
        MethodNotFound: the server does not serve skills.
        ProtocolError: a malformed listing.
    """
    def fetch(cursor: str | None) -> Mapping[str, Any]:
        result = client.request("skills/list", {"cursor": cursor} if cursor else None, timeout=timeout)
        if not isinstance(result, Mapping) or not isinstance(result.get("skills", []), list):
            raise ProtocolError("invalid skills/list result")
        return result

    pages = paginate(fetch, server=client.name, method="skills/list", next_cursor=lambda page: page.get("nextCursor"))
    return [SkillInfo.from_wire(e) for page in pages for e in page.get("skills", [])]


def read_skill(client: Any, skill: str | SkillInfo, timeout: float | None = None) -> Skill:
    """Load one skill: read its ``SKILL.md`` and check it against the listing (size, digest,
    frontmatter). Its other files are read when :meth:`Skill.read` asks for them.

    Args:
        client: the :class:`~mcpsync.Client`.
        skill: a name, the URI of its ``SKILL.md``, or a :class:`SkillInfo` from
            :func:`list_skills`.
        timeout: seconds per request.

    Raises:
        ResourceNotFound: the server lists no such skill.
        SkillIntegrityError: ``SKILL.md`` does not match what the server declared.
    """
    info = skill if isinstance(skill, SkillInfo) else None
    if info is None:
        info = next((s for s in list_skills(client, timeout) if skill in (s.name, s.uri)), None)
        if info is None:
            raise ResourceNotFound(f"the server lists no skill {skill!r}", code=INVALID_PARAMS, uri=skill)
    return Skill(client, info, timeout=timeout)
