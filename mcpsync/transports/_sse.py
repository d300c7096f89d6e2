"""An incremental ``text/event-stream`` parser (:class:`SSEParser`) and its events.

It buffers each event up to the blank line that ends it (events split across reads
are fine), keeps the last event id and the server's ``retry`` even for events without
data (the priming events of resumable servers), ignores comment / keep-alive lines, and
enforces a maximum event size while the event arrives. It is linear in the input: a
partial line is kept in one ``bytearray`` and only new bytes are scanned.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import MessageTooLarge
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE
from ._http_options import EDGE

@dataclass(slots=True)
class SSEEvent:
    """One dispatched server-sent event."""

    event: str
    data: bytes
    id: str | None


class Oversized:
    """Marker the parser emits in place of an event that exceeded the size limit."""

    __slots__ = ("error",)

    def __init__(self, error: MessageTooLarge) -> None:
        self.error = error


class SSEParser:
    """Incremental ``text/event-stream`` parser (WHATWG HTML §9.2.6), linear-time.

    ``feed(chunk)`` returns the events the chunk completed, in order. An event whose
    data exceeds ``max_size`` is discarded as it arrives and reported once, in its
    place, as an :class:`Oversized` marker carrying a :class:`MessageTooLarge`
    (``head``/``tail`` keep its first and last bytes); parsing then carries on.

    Attributes:
        last_event_id: the last ``id`` seen (kept across events, as the spec says).
        retry: the last ``retry`` value, in milliseconds, or None.

    Example:
        >>> p = SSEParser()
        >>> [e.data for e in p.feed(b"id: 1\\ndata: {}\\n\\n: ping\\n\\n")]
        [b'{}']
        >>> p.last_event_id
        '1'
    """

    __slots__ = (
        "max_size",
        "last_event_id",
        "retry",
        "_partial",
        "_skip_lf",
        "_data",
        "_data_size",
        "_event",
        "_has_data",
        "_oversized",
        "_head",
        "_tail",
    )

    def __init__(self, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self._partial = bytearray()
        self._skip_lf = False
        self._data: list[bytes] = []
        self._start_event()

    def feed(self, chunk: bytes) -> list[SSEEvent | Oversized]:
        """Parse ``chunk``; return the events (and oversize markers) it completed."""
        out: list[SSEEvent | Oversized] = []
        if not chunk:
            return out
        pos = 0
        n = len(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                pos = 1
        partial = self._partial
        while pos < n:
            # find the next line terminator (\r, \n or \r\n)
            cr = chunk.find(b"\r", pos)
            lf = chunk.find(b"\n", pos)
            if cr < 0 and lf < 0:
                self._grow_partial(chunk, pos, n)
                break
            if cr < 0 or (0 <= lf < cr):
                end = lf
                nxt = lf + 1
            else:
                end = cr
                nxt = cr + 1
                if nxt < n:
                    if chunk[nxt] == 0x0A:
                        nxt += 1
                else:
                    self._skip_lf = True
            if partial:
                self._grow_partial(chunk, pos, end)
                line = bytes(partial)
                del partial[:]
            else:
                line = chunk[pos:end]
            pos = nxt
            self._line(line, out)
        if len(partial) > self.max_size + 64 and not self._oversized:
            # a single line longer than any acceptable event: stop keeping it
            self._start_discard(bytes(partial[:EDGE]))
            self._tail = bytes(partial[-EDGE:])
            self._data_size = len(partial)
            del partial[:]
            partial += b"-"  # placeholder: the line is not blank
        return out

    def _grow_partial(self, chunk: bytes, start: int, stop: int) -> None:
        if self._oversized:
            if stop > start:
                self._tail = (self._tail + chunk[max(start, stop - EDGE) : stop])[-EDGE:]
                self._data_size += stop - start
                if not self._partial:
                    self._partial += b"-"  # placeholder: the line is not blank
            return
        self._partial += chunk[start:stop]

    def _start_discard(self, head: bytes) -> None:
        self._oversized = True
        self._head = head[:EDGE]
        self._data = []

    def _line(self, line: bytes, out: list[SSEEvent | Oversized]) -> None:
        if not line:
            self._dispatch(out)
            return
        if line[0] == 0x3A:  # ":" comment / keep-alive
            return
        colon = line.find(b":")
        if colon < 0:
            name = line
            value = b""
        else:
            name = line[:colon]
            value = line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._has_data = True
            if self._oversized:
                self._data_size += len(value) + 1
                self._tail = (self._tail + value[-EDGE:])[-EDGE:]
                return
            self._data_size += len(value) + (1 if self._data else 0)
            if self._data_size > self.max_size:
                head = b"\n".join(self._data)[:EDGE] if self._data else value[:EDGE]
                self._start_discard(head)
                self._tail = value[-EDGE:]
                return
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self.retry = int(value)

    def _dispatch(self, out: list[SSEEvent | Oversized]) -> None:
        if self._oversized:
            err = MessageTooLarge(
                f"event of at least {self._data_size} bytes exceeds the limit of {self.max_size} bytes",
                size=self._data_size,
                limit=self.max_size,
                head=self._head,
                tail=self._tail,
            )
            out.append(Oversized(err))
        elif self._has_data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append(SSEEvent(self._event or "message", data, self.last_event_id))
        self._start_event()

    def _start_event(self) -> None:
        """Forget the event just dispatched (or nothing, at first): the next starts empty."""
        self._data = []
        self._data_size = 0
        self._event = ""
        self._has_data = False
        self._oversized = False
        self._head = b""
        self._tail = b""
