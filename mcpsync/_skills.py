"""Skills served by an MCP server: the ``io.modelcontextprotocol/skills`` extension (SEP-2640).

A server that declares the extension (in its capabilities' ``extensions``) lists its skills
with ``skills/list`` and answers ``skills/get {uri}`` for every skill it serves, listed or
not. A skill entry carries the URI of its ``SKILL.md``, that file's frontmatter (as JSON)
and ``resources``: a manifest of every file of the skill with its SHA-256 ``digest`` and
``size``, or the string ``"dynamic"`` for a skill whose content is generated (no digests to
publish). The files themselves are ordinary resources, read with ``resources/read``; a
server that declares ``directoryRead: true`` also lists directories
(``resources/directory/read``).

mcpsync follows the SEP to the letter:

* nothing is asked of a server that did not declare the extension (:class:`MethodNotFound`
  without a request), nor ``resources/directory/read`` of one without ``directoryRead``;
* nothing is read ahead of need: :meth:`Client.list_skills` reads only the listing;
  :meth:`Client.read_skill` loads one skill (reads its ``SKILL.md``); each other file is
  read when :meth:`Skill.read` asks for it;
* a skill is loaded from its URI alone (``skills/get``), listed or not;
* an entry that breaks the SEP (no ``resources``, a manifest without ``SKILL.md`` or with a
  file outside the skill, a ``name`` that is not the URI's last segment, ...) is never
  loaded (and left out of :meth:`Client.list_skills`, with a warning);
* a skill over the limits every host accepts (512 files, 16 MiB) is declined, saying why,
  before any file is read; a dynamic skill is cut off at 16 MiB read;
* every file is checked before it is handed out: size, then digest (manifest skills), and
  for ``SKILL.md`` its YAML frontmatter, field by field, against the entry's (both kinds).
  A mismatch raises :class:`SkillIntegrityError` and the content is neither returned nor
  kept. A file the manifest does not list is not read at all.

Frontmatter is parsed by :mod:`mcpsync._frontmatter` (the block YAML a ``SKILL.md`` uses,
nested mappings and lists included), with PyYAML for the rest of YAML when it is installed.

Example:
    >>> for info in client.list_skills():                        # doctest: +SKIP
    ...     print(info.name, info.description)
    >>> skill = client.read_skill("skill://pdf-processing/SKILL.md")  # skills/get, then SKILL.md
    >>> skill.body                                               # the instructions
    >>> skill.read_text("references/FORMS.md")                   # read and checked on demand
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import posixpath
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import msgspec

from ._constants import SKILLS_EXTENSION
from ._errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    ResourceNotFound,
    SkillIntegrityError,
)
from ._frontmatter import parse_yaml
from ._paging import paginate
from ._protocol_types import ListResourcesResult, Resource

__all__ = [
    "SKILLS_EXTENSION", "SkillFile", "SkillInfo", "Skill", "Skills", "parse_frontmatter",
    "MAX_SKILL_FILES", "MAX_SKILL_BYTES",
]

log = logging.getLogger("mcpsync.client")

ENTRY = "SKILL.md"
#: Files per skill every host accepts (``SKILL.md`` included).
MAX_SKILL_FILES = 512
#: Bytes per skill every host accepts (the sum of the manifest's sizes; for a dynamic skill,
#: of what is read).
MAX_SKILL_BYTES = 16 * 1024 * 1024
#: Characters of frontmatter read at most (a hostile server's SKILL.md is bounded before parsing).
MAX_FRONTMATTER = 256 * 1024
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FRONTMATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)


def _refuse(check: str, message: str, uri: str | None = None, expected: Any = None, actual: Any = None) -> SkillIntegrityError:
    return SkillIntegrityError(message, uri=uri, check=check, expected=expected, actual=actual)


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
    """A skill as ``skills/list`` or ``skills/get`` declares it (nothing of it has been read).

    Attributes:
        uri: the URI of its ``SKILL.md``.
        name: its name (the frontmatter's ``name``: the URI's last path segment).
        description: the frontmatter's ``description``.
        frontmatter: the declared frontmatter, field by field.
        files: the manifest: every file with its digest and size (empty for a dynamic skill).
        dynamic: the server generates the skill's content (``resources: "dynamic"``): no
            digests, no manifest; files are found with directory reads.
    """

    uri: str
    name: str
    description: str
    frontmatter: Mapping[str, Any] = field(repr=False)
    files: tuple[SkillFile, ...] = field(repr=False)
    dynamic: bool = False

    @property
    def root(self) -> str:
        """The skill's directory URI: its ``SKILL.md`` URI without ``/SKILL.md``."""
        return self.uri[: -len(ENTRY) - 1]

    @property
    def total_size(self) -> int:
        """The sum of the manifest's sizes (0 for a dynamic skill)."""
        return sum(f.size for f in self.files)

    @property
    def refusal(self) -> str | None:
        """Why mcpsync declines to load this skill (it exceeds a limit every host accepts),
        or None."""
        if len(self.files) > MAX_SKILL_FILES:
            return f"skill {self.name!r} has {len(self.files)} files, more than the {MAX_SKILL_FILES} a host must accept"
        if self.total_size > MAX_SKILL_BYTES:
            return (f"skill {self.name!r} is {self.total_size:,} bytes, more than the {MAX_SKILL_BYTES:,} "
                    "(16 MiB) a host must accept")
        return None

    @classmethod
    def from_wire(cls, entry: Any) -> "SkillInfo":
        """Build one from a ``skills/list`` entry or a ``skills/get`` result's ``skill``.

        Raises:
            ProtocolError: an entry the SEP calls invalid (hosts must not load it): no
                ``uri`` ending in ``/SKILL.md``, frontmatter without ``name`` (the URI's last
                segment) and ``description``, ``resources`` missing or neither a manifest
                nor ``"dynamic"``, a manifest without ``SKILL.md``, with a file outside the
                skill, listed twice, or without a ``sha256:`` digest and a size.
        """
        if not isinstance(entry, Mapping) or not isinstance(entry.get("uri"), str):
            raise ProtocolError(f"skill entry without a uri: {entry!r:.200}")
        uri = entry["uri"]
        if not uri.endswith("/" + ENTRY) or "://" not in uri:
            raise ProtocolError(f"skill {uri!r:.200}: its uri must name its SKILL.md")
        front = entry.get("frontmatter")
        if not isinstance(front, Mapping):
            raise ProtocolError(f"skill {uri}: frontmatter is not an object")
        name, description = front.get("name"), front.get("description")
        root = uri[: -len(ENTRY) - 1]
        if not isinstance(name, str) or not name or name != root.rsplit("/", 1)[-1]:
            raise ProtocolError(f"skill {uri}: the frontmatter name {name!r:.80} is not the uri's last segment")
        if not isinstance(description, str):
            raise ProtocolError(f"skill {uri}: the frontmatter has no description")
        resources = entry.get("resources")
        if resources == "dynamic":
            return cls(uri, name, description, dict(front), (), dynamic=True)
        if not isinstance(resources, list):
            raise ProtocolError(
                f"skill {uri}: resources is {'missing' if resources is None else type(resources).__name__}, "
                "neither a manifest nor \"dynamic\"; the skill is not loaded"
            )
        files: list[SkillFile] = []
        seen: set[str] = set()
        for item in resources:
            if not isinstance(item, Mapping) or not isinstance(item.get("uri"), str):
                raise ProtocolError(f"skill {uri}: a manifest item without a uri")
            item_uri, digest, size = item["uri"], item.get("digest"), item.get("size")
            if item_uri in seen:
                raise ProtocolError(f"skill {uri}: {item_uri} is listed twice")
            if item_uri != uri and not _within(item_uri, root):
                raise ProtocolError(f"skill {uri}: {item_uri} is not a file of the skill")
            if not isinstance(digest, str) or not _DIGEST.match(digest):
                raise ProtocolError(f"skill {uri}: manifest item {item_uri} lacks a sha256:<64 lowercase hex> digest")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ProtocolError(f"skill {uri}: manifest item {item_uri} lacks a valid size")
            seen.add(item_uri)
            files.append(SkillFile(item_uri, item_uri[len(root) + 1:], digest, size))
        if uri not in seen:
            raise ProtocolError(f"skill {uri}: its manifest does not list its SKILL.md")
        return cls(uri, name, description, dict(front), tuple(files))

    def file(self, path_or_uri: str) -> SkillFile:
        """The manifest item for a relative path or a URI.

        Raises:
            SkillIntegrityError: the manifest does not list it (so it could not be verified).
        """
        for f in self.files:
            if path_or_uri in (f.path, f.uri):
                return f
        raise _refuse("manifest", f"skill {self.name!r}: {path_or_uri} is not in the manifest the server declared; "
                      "not read", uri=path_or_uri)


def _within(uri: str, root: str) -> bool:
    """Whether ``uri`` names a file under the directory ``root`` (no ``..`` way out)."""
    if not uri.startswith(root + "/"):
        return False
    rest = uri[len(root) + 1:]
    return bool(rest) and all(part not in ("", ".", "..") for part in rest.split("/"))


class Skill:
    """A loaded skill: its ``SKILL.md`` was read and checked; its other files are read on demand.

    Thread-safe. Verified contents are kept, so a file of a manifest skill is read from the
    server at most once; a dynamic skill's files are read each time (nothing verifies a copy).

    Attributes:
        info: the :class:`SkillInfo` it was loaded from (the held entry).
        text: the whole ``SKILL.md``.
        frontmatter: the frontmatter parsed from ``SKILL.md`` (equal to the declared one).
        body: ``SKILL.md`` after its frontmatter: the instructions.
    """

    def __init__(self, skills: "Skills", info: SkillInfo, *, timeout: float | None = None) -> None:
        self.info = info
        self._skills = skills
        self._timeout = timeout
        self._lock = threading.Lock()
        self._cache: dict[str, bytes] = {}
        self._sizes: dict[str, int] = {}  # a dynamic skill: bytes read per file (the 16 MiB cap)
        self._walked: set[str] = set()  # a dynamic skill: the files its walk found
        if info.dynamic:
            data = self._fetch_dynamic(info.uri)
        else:
            data = self._fetch(info.file(info.uri))
        text = data.decode("utf-8", errors="strict")
        parsed, body = parse_frontmatter(text)
        _compare_frontmatter(info, parsed)
        self.text = text
        self.frontmatter = parsed
        self.body = body
        if not info.dynamic:
            with self._lock:
                self._cache[info.uri] = data

    def __repr__(self) -> str:
        return f"Skill({self.info.name!r}, {'dynamic' if self.info.dynamic else f'{len(self.info.files)} files'})"

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def entry(self) -> str:
        """The relative path of the entry file, ``SKILL.md``."""
        return ENTRY

    @property
    def files(self) -> list[str]:
        """The relative paths of every file of the skill (``SKILL.md`` included); for a
        dynamic skill, the files found by :meth:`walk` (``["SKILL.md"]`` until then)."""
        if self.info.dynamic:
            with self._lock:
                found = sorted(self._walked)
            return found or [ENTRY]
        return [f.path for f in self.info.files]

    def uri_of(self, path: str) -> str:
        """The URI of a path relative to the skill's root (``references/FORMS.md``), or a
        URI of the skill given as is. A path that leaves the skill's directory is refused.

        Raises:
            SkillIntegrityError: the path is outside the skill (``check="manifest"``).
        """
        root = self.info.root
        if path in (ENTRY, self.info.uri):
            return self.info.uri
        uri = path if "://" in path else root + "/" + posixpath.normpath(path).lstrip("/")
        if not _within(uri, root):
            raise _refuse("manifest", f"skill {self.name!r}: {path} is outside the skill; not read", uri=path)
        return uri

    def read(self, path: str) -> bytes:
        """The bytes of one file (a relative path or its URI), read now if not read before.

        Raises:
            SkillIntegrityError: the file is not in the manifest, its size or digest differs
                from the declared one (the content is discarded), or a dynamic skill's reads
                passed 16 MiB.
        """
        if self.info.dynamic:
            return self._fetch_dynamic(self.uri_of(path))
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

    def listdir(self, path: str = "") -> list[str]:
        """The names of a directory's direct children (``""``: the skill's root), each
        subdirectory with a trailing ``/``. A manifest skill answers from its manifest (a
        file the server added since is not the skill's until the entry is refreshed); a
        dynamic skill asks the server (``resources/directory/read``, if it declared
        ``directoryRead``; else :class:`MethodNotFound`)."""
        prefix = posixpath.normpath(path).strip("/") if path not in ("", ".", "/") else ""
        if not self.info.dynamic:
            names: set[str] = set()
            for f in self.info.files:
                rest = f.path if not prefix else f.path[len(prefix) + 1:] if f.path.startswith(prefix + "/") else None
                if rest:
                    head, sep, _tail = rest.partition("/")
                    names.add(head + "/" if sep else head)
            return sorted(names)
        directory = self.info.root + ("/" + prefix if prefix else "")
        if not _within(directory + "/x", self.info.root):
            raise _refuse("manifest", f"skill {self.name!r}: {path} is outside the skill", uri=path)
        out = []
        for res in self._skills.read_directory(directory, timeout=self._timeout):
            child = getattr(res, "uri", "")
            if not _within(child, self.info.root) or not child.startswith(directory + "/"):
                continue  # the server's answer names something outside this directory: not shown
            name = child[len(directory) + 1:]
            out.append(name + "/" if getattr(res, "mime_type", None) == "inode/directory" else name)
        return sorted(out)

    def walk(self) -> list[str]:
        """Every file of the skill (relative paths): the manifest, or for a dynamic skill a
        walk of directory reads (at most :data:`MAX_SKILL_FILES` files)."""
        if not self.info.dynamic:
            return self.files
        found: list[str] = []
        pending = [""]
        while pending and len(found) <= MAX_SKILL_FILES:
            base = pending.pop()
            for name in self.listdir(base):
                rel = (base + "/" if base else "") + name.rstrip("/")
                (pending if name.endswith("/") else found).append(rel)
        if len(found) > MAX_SKILL_FILES:
            raise _refuse("limit", f"skill {self.name!r} has more than {MAX_SKILL_FILES} files", uri=self.info.uri)
        with self._lock:
            self._walked = set(found)
        return sorted(found)

    def _fetch(self, item: SkillFile) -> bytes:
        data = self._skills.read_file(item.uri, self._timeout)
        verify_file(item, data)
        return data

    def _fetch_dynamic(self, uri: str) -> bytes:
        """A dynamic skill's file, unverified (nothing to verify it by), within 16 MiB read."""
        data = self._skills.read_file(uri, self._timeout)
        with self._lock:
            sizes = {**self._sizes, uri: len(data)}
            total = sum(sizes.values())
            if total > MAX_SKILL_BYTES:
                raise _refuse("limit", f"skill {self.name!r}: reading {uri} would bring what was read of this "
                              f"dynamic skill to {total:,} bytes, past the {MAX_SKILL_BYTES:,} (16 MiB) limit; "
                              "not used", uri=uri, expected=MAX_SKILL_BYTES, actual=total)
            self._sizes = sizes
        return data


def verify_file(item: SkillFile, data: bytes) -> None:
    """Check ``data`` against the manifest item: size first, then the digest.

    Raises:
        SkillIntegrityError: a mismatch, or a digest algorithm other than sha256.
    """
    if len(data) != item.size:
        raise _refuse("size", f"{item.uri}: {len(data)} bytes, the server declared {item.size}; content refused",
                      uri=item.uri, expected=item.size, actual=len(data))
    algorithm, _, expected = item.digest.partition(":")
    if algorithm.lower() != "sha256" or not expected:
        raise _refuse("digest", f"{item.uri}: unsupported digest {item.digest!r:.40} (only sha256:<hex> is verified); "
                      "content refused", uri=item.uri, expected=item.digest)
    actual = hashlib.sha256(data).hexdigest()
    if not hmac.compare_digest(actual, expected.lower()):
        raise _refuse("digest", f"{item.uri}: sha256 {actual} differs from the declared {expected}; content refused",
                      uri=item.uri, expected=item.digest, actual="sha256:" + actual)


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split a ``SKILL.md`` into its YAML frontmatter (a mapping) and its body.

    Raises:
        SkillIntegrityError: the frontmatter is missing, is not a YAML mapping, or uses YAML
            beyond :mod:`mcpsync._frontmatter`'s subset while PyYAML is not installed.
    """
    m = _FRONTMATTER.match(text)
    if m is None:
        raise _refuse("frontmatter", "SKILL.md has no YAML frontmatter")
    block, body = m.group(1), text[m.end():]
    if len(block) > MAX_FRONTMATTER:
        raise _refuse("frontmatter", f"SKILL.md frontmatter is {len(block):,} characters, more than the "
                      f"{MAX_FRONTMATTER:,} read (a name, a description and some metadata take far less)")
    try:
        parsed: Any = parse_yaml(block)
    except SkillIntegrityError as exc:
        if not getattr(exc, "unsupported", False):
            raise _refuse("frontmatter", f"SKILL.md frontmatter is not valid YAML: {exc}") from None
        try:
            import yaml  # type: ignore[import-untyped]  # PyYAML, when installed: the whole of YAML
        except ImportError:
            raise _refuse("frontmatter", f"SKILL.md frontmatter uses YAML this client reads only with PyYAML "
                          f"installed ({exc})") from None
        try:
            parsed = yaml.safe_load(block)
        except yaml.YAMLError as err:
            raise _refuse("frontmatter", f"SKILL.md frontmatter is not valid YAML: {err}") from None
    if parsed is None:
        parsed = {}
    if not isinstance(parsed, dict):
        raise _refuse("frontmatter", "SKILL.md frontmatter is not a mapping")
    return parsed, body


def _compare_frontmatter(info: SkillInfo, parsed: Mapping[str, Any]) -> None:
    declared = info.frontmatter
    for key in sorted(set(declared) | set(parsed)):
        if key not in parsed or key not in declared or _normal(parsed[key]) != _normal(declared[key]):
            raise _refuse(
                "frontmatter",
                f"skill {info.name!r}: SKILL.md frontmatter field {key!r} is {parsed.get(key)!r:.80}, "
                f"the server declared {declared.get(key)!r:.80}; skill not loaded",
                uri=info.uri, expected=declared.get(key), actual=parsed.get(key),
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


class Skills:
    """The skills methods of one Client, over its collaborators.

    Args:
        server: the server's name (in errors and logs).
        request: ``request(method, params, timeout=...)``: the client's request path.
        read_resource: ``read_resource(uri, timeout=..., refresh=True)``: a ``resources/read``.
        declaration: the server's settings of the skills extension (None: not declared);
            connects if needed.
    """

    def __init__(
        self, *, server: str, request: Callable[..., Any], read_resource: Callable[..., Any],
        declaration: Callable[[], Mapping[str, Any] | None],
    ) -> None:
        self.server = server
        self._request = request
        self._read_resource = read_resource
        self._declaration = declaration

    def _declared(self, what: str) -> Mapping[str, Any]:
        settings = self._declaration()
        if settings is None:
            raise MethodNotFound(
                f"{self.server} does not declare the skills extension ({SKILLS_EXTENSION}): no {what}",
                code=METHOD_NOT_FOUND,
            )
        return settings

    def list_skills(self, timeout: float | None = None) -> list[SkillInfo]:
        """Every valid skill the server lists (``skills/list``, every page); reads no file.
        An entry the SEP calls invalid is left out, with a warning naming why."""
        self._declared("skills/list")

        def fetch(cursor: str | None) -> Mapping[str, Any]:
            result = self._request("skills/list", {"cursor": cursor} if cursor else None, timeout=timeout)
            if not isinstance(result, Mapping) or not isinstance(result.get("skills", []), list):
                raise ProtocolError(f"{self.server}: invalid skills/list result")
            return result

        out = []
        for page in paginate(fetch, server=self.server, method="skills/list", next_cursor=lambda p: p.get("nextCursor")):
            for entry in page.get("skills", []):
                try:
                    out.append(SkillInfo.from_wire(entry))
                except ProtocolError as exc:
                    log.warning("%s: skills/list entry left out: %s", self.server, exc)
        return out

    def get_skill(self, uri: str, timeout: float | None = None) -> SkillInfo:
        """``skills/get``: the entry of the skill whose ``SKILL.md`` is at ``uri``, listed or not.

        Raises:
            ResourceNotFound: the server serves no skill there.
            ProtocolError: an entry the SEP calls invalid.
        """
        self._declared("skills/get")
        try:
            result = self._request("skills/get", {"uri": uri}, timeout=timeout)
        except InvalidParams as exc:
            raise ResourceNotFound(exc.message, code=exc.code, data=exc.data, uri=uri) from None
        skill = result.get("skill") if isinstance(result, Mapping) else None
        if not isinstance(skill, Mapping):
            raise ProtocolError(f"{self.server}: skills/get of {uri} answered without a skill")
        info = SkillInfo.from_wire(skill)
        if info.uri != uri:
            raise ProtocolError(f"{self.server}: skills/get of {uri} answered with the skill at {info.uri}")
        return info

    def load(self, skill: str | SkillInfo, timeout: float | None = None) -> Skill:
        """Load one skill (see ``Client.read_skill``)."""
        if isinstance(skill, SkillInfo):
            info = skill
        elif "://" in skill:
            info = self.get_skill(skill, timeout)  # from its URI alone
        else:
            named = [s for s in self.list_skills(timeout) if s.name == skill]
            if not named:
                raise ResourceNotFound(f"{self.server} lists no skill named {skill!r} (a skill not listed is loaded "
                                       "by the URI of its SKILL.md)", code=INVALID_PARAMS, uri=skill)
            if len(named) > 1:
                raise InvalidParams(f"{self.server} lists {len(named)} skills named {skill!r}: "
                                    f"{', '.join(s.uri for s in named)}; name one by its URI", code=INVALID_PARAMS)
            info = named[0]
        refusal = info.refusal
        if refusal is not None:
            raise _refuse("limit", refusal + "; not loaded", uri=info.uri)
        return Skill(self, info, timeout=timeout)

    def read_directory(self, uri: str, timeout: float | None = None) -> list[Resource]:
        """``resources/directory/read``: the direct children of a directory resource, every
        page (only of a server that declared ``directoryRead: true``)."""
        settings = self._declared("resources/directory/read")
        if settings.get("directoryRead") is not True:
            raise MethodNotFound(f"{self.server} did not declare directoryRead: no resources/directory/read",
                                 code=METHOD_NOT_FOUND)
        def fetch(cursor: str | None) -> ListResourcesResult:
            params = {"uri": uri, **({"cursor": cursor} if cursor else {})}
            try:
                page = self._request("resources/directory/read", params, timeout=timeout)
            except InvalidParams as exc:
                raise ResourceNotFound(exc.message, code=exc.code, data=exc.data, uri=uri) from None
            try:
                return msgspec.convert(page, ListResourcesResult)
            except msgspec.ValidationError as exc:
                raise ProtocolError(f"{self.server}: invalid resources/directory/read result: {exc}") from None

        out: list[Resource] = []
        for page in paginate(fetch, server=self.server, method="resources/directory/read"):
            out.extend(page.resources)
        return out

    def read_file(self, uri: str, timeout: float | None) -> bytes:
        """The bytes of one skill file (``resources/read``, never from a cache)."""
        result = self._read_resource(uri, timeout=timeout, refresh=True)
        contents = [c for c in result.contents if c.uri in (uri, "")] or list(result.contents)
        if len(contents) != 1:
            raise ProtocolError(f"resources/read of {uri} returned {len(contents)} contents, not one file")
        c = contents[0]
        if c.text is not None:
            return c.text.encode("utf-8")  # type: ignore[no-any-return]
        if c.blob is not None:
            try:
                return base64.b64decode(c.blob, validate=True)
            except ValueError:
                raise ProtocolError(f"resources/read of {uri}: the blob is not base64") from None
        return b""
