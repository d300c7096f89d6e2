"""Client extensions (SEP-2133): what this client declares it supports, with its settings.

An extension is named by a reverse-DNS identifier (``io.modelcontextprotocol/tasks``) and
declared in the client's capabilities under ``extensions``: in ``initialize`` (2025 era) and
in every request's ``_meta`` client capabilities (2026-07-28 era), with its settings (a JSON
object; ``{}`` declares support with no options).

By default a Client declares the extensions it implements: the tasks extension (SEP-2663:
a server may answer ``tools/call`` with a task, which ``call_tool`` follows) and the skills
extension (SEP-2640). ``Client(extensions=[...])`` declares exactly the given ones instead:
add yours to :attr:`Extension.DEFAULTS` to keep them.

Example:
    >>> from mcpsync import Extension
    >>> mine = Extension("com.example/audit", {"level": "full"})
    >>> wire_extensions([*Extension.DEFAULTS, mine])["com.example/audit"]
    {'level': 'full'}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Iterable, Mapping

from ._constants import SKILLS_EXTENSION, TASKS_EXTENSION

__all__ = ["Extension", "wire_extensions", "TASKS_EXTENSION", "SKILLS_EXTENSION"]

#: ``vendor-prefix/name``: a reverse-DNS prefix (dot-separated labels), a slash, a name.
_IDENTIFIER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*/[A-Za-z0-9._-]+$")


@dataclass(frozen=True, slots=True)
class Extension:
    """One extension the client declares: its identifier and its settings.

    Attributes:
        id: the reverse-DNS identifier (``io.modelcontextprotocol/tasks``, ``com.example/x``).
        settings: the extension's settings, a JSON object (read-only; ``{}``: none).

    Raises:
        ValueError: an identifier that is not ``prefix/name`` with a reverse-DNS prefix, or
            settings that are not a JSON object.

    Example:
        >>> Extension("io.modelcontextprotocol/tasks")
        Extension(id='io.modelcontextprotocol/tasks', settings={})
    """

    id: str
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: the tasks extension (SEP-2663), which mcpsync implements
    TASKS: ClassVar["Extension"]
    #: the skills extension (SEP-2640), which mcpsync implements
    SKILLS: ClassVar["Extension"]
    #: what a Client declares unless told otherwise
    DEFAULTS: ClassVar[tuple["Extension", ...]]

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _IDENTIFIER.match(self.id):
            raise ValueError(f"extension identifier {self.id!r} is not 'reverse.dns.prefix/name'")
        if not isinstance(self.settings, Mapping):
            raise ValueError(f"extension {self.id}: settings must be a mapping, not {type(self.settings).__name__}")
        try:
            frozen = json.loads(json.dumps(dict(self.settings)))  # a JSON object, copied
        except (TypeError, ValueError) as exc:
            raise ValueError(f"extension {self.id}: settings are not JSON: {exc}") from None
        object.__setattr__(self, "settings", MappingProxyType(frozen))

    def __repr__(self) -> str:
        return f"Extension(id={self.id!r}, settings={dict(self.settings)!r})"

    def __reduce__(self) -> Any:  # (a read-only mapping does not pickle: its dict does; a ClientSpec sends it)
        return (Extension, (self.id, dict(self.settings)))


Extension.TASKS = Extension(TASKS_EXTENSION)
Extension.SKILLS = Extension(SKILLS_EXTENSION)
Extension.DEFAULTS = (Extension.TASKS, Extension.SKILLS)


def wire_extensions(extensions: Iterable[Extension | str] | None) -> dict[str, dict[str, Any]]:
    """The ``extensions`` member of the client capabilities: identifier → settings.

    ``None`` declares :attr:`Extension.DEFAULTS`; a string is an extension without settings.

    Raises:
        ValueError: an invalid identifier, or one declared twice.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in Extension.DEFAULTS if extensions is None else extensions:
        ext = Extension(item) if isinstance(item, str) else item
        if not isinstance(ext, Extension):
            raise ValueError(f"extensions: {item!r} is neither an Extension nor an identifier")
        if ext.id in out:
            raise ValueError(f"extension {ext.id} is declared twice")
        out[ext.id] = dict(ext.settings)
    return out
