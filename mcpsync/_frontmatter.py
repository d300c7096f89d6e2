"""The YAML of a ``SKILL.md`` frontmatter, without a YAML library.

Agent Skills frontmatter is a small YAML mapping: scalars (``name``, ``description``,
``license``, ``compatibility``, ``allowed-tools``), a ``metadata`` mapping, and whatever
else an author writes. This parser reads the block-style subset such files use:

* block mappings nested by indentation (spaces), and block sequences (``- item``, also at
  the indentation of their key), sequence items that are mappings (``- key: value``);
* flow sequences and mappings (``[a, "b"]``, ``{k: v}``), nested;
* plain scalars (folded over continuation lines), ``'single'`` and ``"double"`` quoted
  scalars (with escapes; folded over lines), block scalars ``|`` and ``>`` with chomping
  (``-``, ``+``) and an indentation indicator;
* comments, and the YAML 1.2 core schema for plain scalars (``null``/``~``, ``true``/
  ``false``, integers, floats); anything else (dates included) stays text.

What it does not read (anchors, aliases, tags, complex keys, directives, several
documents, tabs for indentation) raises :class:`~mcpsync.SkillIntegrityError` with
``unsupported`` True; the caller may then hand the block to PyYAML when it is installed.
Malformed input raises it with ``unsupported`` False (``check`` is ``"frontmatter"``).

Example:
    >>> parse_yaml("name: pdf\\nmetadata:\\n  version: 2\\ntags: [a, b]\\n")
    {'name': 'pdf', 'metadata': {'version': 2}, 'tags': ['a', 'b']}
"""

from __future__ import annotations

import re
from typing import Any

from ._errors import SkillIntegrityError

__all__ = ["parse_yaml"]

#: deepest nesting read (a frontmatter is shallow; this bounds hostile input)
MAX_DEPTH = 32


def _malformed(message: str) -> SkillIntegrityError:
    """The frontmatter is not valid YAML (of the subset read here)."""
    return SkillIntegrityError(message, uri=None, check="frontmatter", expected=None, actual=None, unsupported=False)


def _unsupported(message: str) -> SkillIntegrityError:
    """Valid YAML, perhaps, but beyond the subset this parser reads (``unsupported``: True)."""
    return SkillIntegrityError(message, uri=None, check="frontmatter", expected=None, actual=None, unsupported=True)


_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$|^0o[0-7]+$|^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}
_HEX = {"x": 2, "u": 4, "U": 8}


def _resolve(text: str) -> Any:
    """A plain scalar by the YAML 1.2 core schema."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text)
    if _FLOAT.match(text) and any(ch.isdigit() for ch in text):
        return float(text)
    if text.lower() in (".inf", "+.inf"):
        return float("inf")
    if text.lower() == "-.inf":
        return float("-inf")
    if text.lower() == ".nan":
        return float("nan")
    return text


def _strip_comment(text: str) -> str:
    """A plain scalar's line without its trailing comment (`` #`` starts one)."""
    at = text.find(" #")
    return (text[:at] if at >= 0 else text).rstrip()


def _check_plain_start(text: str, line_no: int) -> None:
    if text[:1] in ("&", "*", "!"):
        raise _unsupported(f"line {line_no}: anchors, aliases and tags are not read without PyYAML")
    if text[:1] in ("@", "`", "%") or text[:2] in ("- ", "? ", ": ") or text in ("-", "?", ":"):
        raise _malformed(f"line {line_no}: a plain scalar cannot start with {text[:2]!r}")


class _Lines:
    """The block's lines, each as (indentation, text without it, 1-based number)."""

    def __init__(self, block: str) -> None:
        self.items: list[tuple[int, str, int]] = []
        for number, raw in enumerate(block.splitlines(), 1):
            body = raw.lstrip(" ")
            if body.startswith("\t") and body.strip():
                raise _unsupported(f"line {number}: tabs as indentation are not read without PyYAML")
            self.items.append((len(raw) - len(body), body.rstrip(), number))
        self.pos = 0

    def skip_blank(self) -> None:
        while self.pos < len(self.items):
            _indent, text, _n = self.items[self.pos]
            if text and not text.startswith("#"):
                return
            self.pos += 1

    def peek(self) -> tuple[int, str, int] | None:
        self.skip_blank()
        return self.items[self.pos] if self.pos < len(self.items) else None


def parse_yaml(block: str) -> Any:
    """The value of a YAML block (the subset above): usually a mapping.

    Raises:
        SkillIntegrityError: malformed YAML, or (``unsupported``) a feature beyond the subset.
    """
    for number, raw in enumerate(block.splitlines(), 1):
        if raw.startswith("%") or raw.rstrip() in ("---", "..."):
            raise _unsupported(f"line {number}: directives and document markers are not read without PyYAML")
    lines = _Lines(block)
    first = lines.peek()
    if first is None:
        return None
    value = _block(lines, first[0], 0)
    rest = lines.peek()
    if rest is not None:
        raise _malformed(f"line {rest[2]}: unexpected text at indentation {rest[0]}: {rest[1][:40]!r}")
    return value


def _block(lines: _Lines, indent: int, depth: int) -> Any:
    """The block node starting at the current line, whose lines sit at ``indent``."""
    if depth > MAX_DEPTH:
        raise _malformed(f"nesting deeper than {MAX_DEPTH} levels")
    head = lines.peek()
    assert head is not None
    _i, text, number = head
    if text == "-" or text.startswith("- "):
        return _sequence(lines, indent, depth)
    if _key_split(text, number) is not None:
        return _mapping(lines, indent, depth)
    # a lone scalar (a document that is a scalar, or a sequence item's value)
    lines.pos += 1
    return _scalar_value(text, lines, indent - 1, number, depth)


def _key_split(text: str, number: int) -> tuple[str, str] | None:
    """(key, rest) of ``key: rest`` (or ``key:``), None when the line is no mapping entry."""
    if text.startswith("? "):
        raise _unsupported(f"line {number}: complex keys are not read without PyYAML")
    if text[:1] in ('"', "'"):
        end = _quoted_end(text, 0)
        after = text[end + 1:] if end >= 0 else ""
        if after == ":" or after.startswith(": "):
            return _unquote(text[: end + 1], number), after[1:].strip()
        return None
    if text[:1] in ("[", "{", "&", "*", "!", "|", ">"):
        return None
    at = 0
    while True:
        at = text.find(":", at)
        if at < 0:
            return None
        if at + 1 == len(text) or text[at + 1] == " ":
            key = text[:at].rstrip()
            if not key or " #" in key:
                return None
            return key, text[at + 1:].strip()
        at += 1


def _mapping(lines: _Lines, indent: int, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while True:
        head = lines.peek()
        if head is None or head[0] < indent:
            return out
        at, text, number = head
        if at > indent:
            raise _malformed(f"line {number}: unexpected indentation")
        split = _key_split(text, number)
        if split is None:
            if text == "-" or text.startswith("- "):
                return out  # a sequence at the parent's indentation ends this mapping
            raise _malformed(f"line {number}: expected 'key: value', found {text[:40]!r}")
        key, rest = split
        if key[:1] in ("&", "*", "!"):
            raise _unsupported(f"line {number}: anchors, aliases and tags are not read without PyYAML")
        if key in out:
            raise _malformed(f"line {number}: key {key!r} appears twice")
        lines.pos += 1
        out[key] = _value_after_key(rest, lines, indent, number, depth)


def _value_after_key(rest: str, lines: _Lines, indent: int, number: int, depth: int) -> Any:
    """The value of ``key: rest`` on a line at ``indent``."""
    rest = rest if not rest.startswith("#") else ""
    if rest:
        return _scalar_value(rest, lines, indent, number, depth)
    nxt = lines.peek()
    if nxt is None:
        return None
    at, text, _n = nxt
    if at > indent:
        return _block(lines, at, depth + 1)
    if at == indent and (text == "-" or text.startswith("- ")):
        return _sequence(lines, indent, depth + 1)  # a sequence at its key's indentation
    return None


def _sequence(lines: _Lines, indent: int, depth: int) -> list[Any]:
    out: list[Any] = []
    while True:
        head = lines.peek()
        if head is None or head[0] != indent or not (head[1] == "-" or head[1].startswith("- ")):
            if head is not None and head[0] > indent:
                raise _malformed(f"line {head[2]}: unexpected indentation in a sequence")
            return out
        _at, text, number = head
        item = text[1:].lstrip(" ")
        if not item or item.startswith("#"):
            lines.pos += 1
            nxt = lines.peek()
            out.append(_block(lines, nxt[0], depth + 1) if nxt is not None and nxt[0] > indent else None)
            continue
        if item == "-" or item.startswith("- ") or _key_split(item, number) is not None:
            # a nested sequence or a mapping: a block node at the column after "- "
            column = indent + (len(text) - len(item))
            lines.items[lines.pos] = (column, item, number)
            out.append(_block(lines, column, depth + 1))
        else:  # a scalar: its continuation lines (and a block scalar's) sit deeper than the dash
            lines.pos += 1
            out.append(_scalar_value(item, lines, indent, number, depth + 1))


def _scalar_value(text: str, lines: _Lines, indent: int, number: int, depth: int) -> Any:
    """A value that starts on the line of its key (or sequence dash): quoted, flow, block
    scalar or plain, with its continuation lines (those indented more than ``indent``)."""
    if text[:1] in ('"', "'"):
        return _quoted(text, lines, indent, number)
    if text[:1] in ("[", "{"):
        whole = _gather(text, lines, indent, number, _flow_end, "an unclosed flow collection")
        value, end = _flow(whole, 0, number, depth)
        tail = whole[end:].strip()
        if tail and not tail.startswith("#"):
            raise _malformed(f"line {number}: text after a flow collection: {tail[:40]!r}")
        return value
    if text[:1] in ("|", ">"):
        return _block_scalar(text, lines, indent, number)
    _check_plain_start(text, number)
    if _key_split(text, number) is not None:
        raise _malformed(f"line {number}: a mapping cannot start on the line of its key")
    parts = [_strip_comment(text)]
    if " #" not in text:
        while True:
            nxt = lines.peek()
            if nxt is None or nxt[0] <= indent or _key_split(nxt[1], nxt[2]) is not None:
                break
            parts.append(_strip_comment(nxt[1]))
            lines.pos += 1
            if " #" in nxt[1]:
                break
    return _resolve(" ".join(p for p in parts if p))


def _quoted_end(text: str, start: int) -> int:
    """Index of the quote closing the scalar opened at ``start`` (-1: not in ``text``)."""
    quote = text[start]
    i = start + 1
    while True:
        i = text.find(quote, i)
        if i < 0:
            return -1
        if quote == "'":
            if text.startswith("''", i):
                i += 2  # an escaped quote
                continue
            return i
        j = i - 1
        while j > start and text[j] == "\\":
            j -= 1
        if (i - 1 - j) % 2 == 0:  # an even run of backslashes: the quote is not escaped
            return i
        i += 1


def _unquote(token: str, number: int) -> str:
    quote, inner = token[0], token[1:-1]
    if "\n" in inner:
        inner = _fold(inner, quote == '"')
    if quote == "'":
        return inner.replace("''", "'")
    out: list[str] = []
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        code = inner[i + 1: i + 2]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in _HEX:
            digits = inner[i + 2: i + 2 + _HEX[code]]
            if len(digits) != _HEX[code] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _malformed(f"line {number}: a bad escape \\{code}{digits}")
            out.append(chr(int(digits, 16)))
            i += 2 + _HEX[code]
        else:
            raise _malformed(f"line {number}: an unknown escape \\{code}")
    return "".join(out)


def _gather(text: str, lines: _Lines, indent: int, number: int, find_end: Any, what: str) -> str:
    """``text`` and the raw lines after it (blank ones included) up to the line where
    ``find_end(whole)`` finds the construct's end: the lines it may span (those indented
    more than ``indent``) are joined once and searched once, so a long one costs linear time."""
    stop = lines.pos
    while stop < len(lines.items) and (not lines.items[stop][1] or lines.items[stop][0] > indent):
        stop += 1
    rows = [text] + [" " * at + more for at, more, _n in lines.items[lines.pos:stop]]
    candidate = "\n".join(rows)
    end = find_end(candidate)
    if end < 0:
        raise _malformed(f"line {number}: {what}")
    used = candidate.count("\n", 0, end)  # the lines after the first that the construct spans
    lines.pos += used
    return "\n".join(rows[: used + 1])


def _quoted(text: str, lines: _Lines, indent: int, number: int) -> str:
    """A quoted scalar, folded over lines until its closing quote."""
    whole = _gather(text, lines, indent, number, lambda w: _quoted_end(w, 0), "an unclosed quoted scalar")
    end = _quoted_end(whole, 0)
    tail = whole[end + 1:].strip()
    if tail and not tail.startswith("#"):
        raise _malformed(f"line {number}: text after a quoted scalar: {tail[:40]!r}")
    return _unquote(whole[: end + 1], number)


def _fold(inner: str, double: bool) -> str:
    """Line folding inside a quoted scalar: a break between two lines is a space, each
    empty line a newline; spaces around breaks go; in double quotes a break escaped with a
    backslash joins the lines with nothing."""
    rows = inner.split("\n")
    out = rows[0]
    empties = 0
    for k, row in enumerate(rows[1:], 1):
        last = k == len(rows) - 1
        body = row.strip(" \t") if not last else row.lstrip(" \t")
        if not body and not last:
            empties += 1
            continue
        escaped = double and (len(out) - len(out.rstrip("\\"))) % 2 == 1
        if escaped:
            out = out[:-1]
        else:
            out = out.rstrip(" \t")
        out += ("\n" * empties) if empties else ("" if escaped else " ")
        out += body
        empties = 0
    return out + "\n" * empties


def _block_scalar(text: str, lines: _Lines, indent: int, number: int) -> str:
    """``|`` (literal) or ``>`` (folded), with chomping and an indentation indicator."""
    header = _strip_comment(text)
    style, flags = header[0], header[1:]
    chomp, explicit = "", 0
    for ch in flags:
        if ch in "+-" and not chomp:
            chomp = ch
        elif ch.isdigit() and ch != "0" and not explicit:
            explicit = int(ch)
        else:
            raise _malformed(f"line {number}: a bad block scalar header {header!r}")
    body: list[tuple[int, str]] = []
    width: int | None = indent + explicit if explicit else None
    while lines.pos < len(lines.items):
        raw_indent, content, _n = lines.items[lines.pos]
        if content and raw_indent <= indent:
            break
        if content and width is None:
            width = raw_indent
        if content and width is not None and raw_indent < width:
            break
        body.append((raw_indent, content))
        lines.pos += 1
    width = width or indent + 1
    rows = [(" " * (i - width) + c) if c else "" for i, c in body]
    trailing = 0
    while rows and not rows[-1]:
        rows.pop()
        trailing += 1
    if style == "|":
        value = "\n".join(rows)
    else:  # folded: a break between two plain lines is a space; blank lines are breaks
        parts: list[str] = []
        breaks, last = 0, ""
        for row in rows:
            if not row:
                breaks += 1
                continue
            kind = "more" if row.startswith(" ") else "plain"
            if last:
                parts.append((" " if not breaks else "\n" * breaks) if last == kind == "plain" else "\n" * (breaks + 1))
            else:
                parts.append("\n" * breaks)
            parts.append(row)
            breaks, last = 0, kind
        value = "".join(parts)
    if not rows or chomp == "-":
        return value + ("\n" * trailing if chomp == "+" else "")
    return value + "\n" + ("\n" * trailing if chomp == "+" else "")


def _flow_end(text: str) -> int:
    """The index of the bracket that closes the flow collection starting ``text`` (-1: not
    closed). A quote opens a quoted scalar only where a node starts: in a plain scalar it is text."""
    level, i, prev = 0, 0, ""
    while i < len(text):
        ch = text[i]
        if ch in "\"'" and prev in ("", "[", "{", ",", ":"):
            end = _quoted_end(text, i)
            if end < 0:
                return -1
            i, prev = end + 1, ch
            continue
        if ch == "#" and (i == 0 or text[i - 1] in " \t\n"):
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "[{":
            level += 1
        elif ch in "]}":
            level -= 1
            if level == 0:
                return i
        if ch not in " \t\n":
            prev = ch
        i += 1
    return -1


def _space(text: str, i: int) -> int:
    """Past the spaces, line breaks and comments at ``text[i]`` (inside a flow collection)."""
    while i < len(text):
        if text[i] in " \t\n":
            i += 1
        elif text[i] == "#" and (i == 0 or text[i - 1] in " \t\n"):
            while i < len(text) and text[i] != "\n":
                i += 1
        else:
            break
    return i


def _flow(text: str, i: int, number: int, depth: int) -> tuple[Any, int]:
    """A flow node at ``text[i]``: (value, index after it)."""
    if depth > MAX_DEPTH:
        raise _malformed(f"line {number}: nesting deeper than {MAX_DEPTH} levels")
    i = _space(text, i)
    if i >= len(text):
        raise _malformed(f"line {number}: a flow collection ends early")
    ch = text[i]
    if ch == "[":
        items: list[Any] = []
        i += 1
        while True:
            i = _space(text, i)
            if i < len(text) and text[i] == "]":
                return items, i + 1
            value, i = _flow(text, i, number, depth + 1)
            items.append(value)
            i = _flow_separator(text, i, "]", number)
            if text[i] == "]":
                return items, i + 1
            i += 1
    if ch == "{":
        mapping: dict[str, Any] = {}
        i += 1
        while True:
            i = _space(text, i)
            if i < len(text) and text[i] == "}":
                return mapping, i + 1
            key, i = _flow(text, i, number, depth + 1)
            i = _space(text, i)
            member: Any = None
            if i < len(text) and text[i] == ":":  # (the value may follow on the next line)
                member, i = _flow(text, i + 1, number, depth + 1)
            if not isinstance(key, str):
                key = str(key) if key is not None else "null"
            if key in mapping:
                raise _malformed(f"line {number}: key {key!r} appears twice")
            mapping[key] = member
            i = _flow_separator(text, i, "}", number)
            if text[i] == "}":
                return mapping, i + 1
            i += 1
    if ch in "\"'":
        end = _quoted_end(text, i)
        if end < 0:
            raise _malformed(f"line {number}: an unclosed quoted scalar")
        return _unquote(text[i: end + 1], number), end + 1
    if ch in "&*!":
        raise _unsupported(f"line {number}: anchors, aliases and tags are not read without PyYAML")
    start = i
    while i < len(text) and text[i] not in ",]}":
        if text[i] == ":" and (i + 1 == len(text) or text[i + 1] in " \n,]}"):
            break
        if text[i] == "#" and text[i - 1] in " \n":
            break
        i += 1
    words = " ".join(part.strip() for part in text[start:i].split("\n"))
    return _resolve(" ".join(words.split(" ")).strip()), i


def _flow_separator(text: str, i: int, close: str, number: int) -> int:
    i = _space(text, i)
    if i >= len(text) or text[i] not in ("," + close):
        raise _malformed(f"line {number}: expected ',' or {close!r} in a flow collection")
    return i
