"""The stdio pipe's hot path: newline JSON-RPC framing (reads, waits and writes of a
non-blocking pipe), the dispatcher's idle gate and the stdio idle watch's switch.

This file is the single source of both implementations: imported as is it is the
pure-Python twin; ``setup.py`` compiles a copy of it with Cython (pure-Python mode,
types from ``_cpipes.pxd``) into the ``_cpipes`` extension. Keep it in the subset of
Python that Cython compiles unchanged. (The rest of the hot path: :mod:`._pyspeedups`.)
"""

import collections
import errno
import functools
import os
import select
import time

try:  # compiled, ``cython.compiled`` is True (Cython resolves it); imported as is, False
    import cython
except ImportError:  # the pure-Python package: Cython is only a build requirement
    _COMPILED = False
else:
    _COMPILED = cython.compiled

__all__ = ["LineFramer", "FrameTooLarge", "write_line", "DEFAULT_MAX_MESSAGE_SIZE", "EpollSwitch", "IdleGate", "PipeEnds"]


DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
_EDGE = 256
_CHUNK = 65536  # one read of a pipe (LineFramer.read)
_SMALL = 2048  # compiled, a read of more is made into bytes of its own, not copied out of the module's buffer
_INSTANT = 5e-6  # a wait that ended sooner found its input in already (LineFramer.wait_message)


def _millis(timeout):
    """``timeout`` s as whole milliseconds for poll(2), rounded up (0 to ~23 days)."""
    ms = min(max(timeout, 0.0), 2e6) * 1000.0
    return int(ms) + (1 if int(ms) < ms else 0)


def write_line(fd, message):
    """Write ``message`` and a newline to the non-blocking file ``fd``: the bytes written (fewer
    when the pipe is full); raises as ``os.write`` does. Compiled, one writev(2) (_cpipes.pxd)."""
    if _COMPILED:
        return _write_line(fd, message, len(message))
    try:
        return os.write(fd, message + b"\n")
    except BlockingIOError:
        return 0


class FrameTooLarge(Exception):
    """A frame exceeded ``max_size``. ``head``/``tail`` keep its first and last bytes."""

    def __init__(self, size, limit, head, tail):
        Exception.__init__(self, "message of at least %d bytes exceeds the limit of %d bytes" % (size, limit))
        self.size = size
        self.limit = limit
        self.head = head
        self.tail = tail


def _without_cr(frame):
    """A frame without the ``\\r`` of a CRLF line ending."""
    return frame[:-1] if frame and frame[len(frame) - 1] == 13 else frame


def _worth_keeping(frame):
    """Not empty and not whitespace only (blank lines between messages are skipped)."""
    return len(frame) > 0 and (frame[0] > 32 or not frame.isspace())


class LineFramer:
    """Splits a byte stream into newline-delimited messages.

    ``feed(chunk)`` returns the complete messages the chunk finished (without the line
    ending; a trailing ``\\r`` is dropped, blank lines are skipped). A message longer than
    ``max_size`` is discarded as it arrives (memory stays bounded) and raises
    :class:`FrameTooLarge` once, at the newline that ends it; the framer then carries on,
    so later messages are unaffected. Messages completed in the same chunk as the
    error are kept for the next ``feed``/``pop``.

    ``read(fd)`` is a reader's way: it reads one chunk of a pipe and frames it, keeping
    the complete messages, oldest first, in ``first`` (a list of one: the message or
    None) and then ``ready`` (a deque), from which the reader takes them with no call
    (``data = first[0]; first[0] = None``; ``promote()`` moves the next one up), so that
    no byte read is ever only in a local.
    Compiled, each call runs in C, where no signal handler runs. An exception a handler
    raises (KeyboardInterrupt) can come at any call or backward jump of the pure build,
    never elsewhere (CPython runs handlers there only): the chunk is read by a ``for``
    step (over ``iter(partial(os.read, fd, size), b"")``) and kept in ``_pending`` with no
    call between; the framing works on locals and is committed with no call (the
    carried-over bytes, the discard state, the messages, ``_pending`` cleared); a read
    cut short leaves its chunk to the next read.
    """

    def __init__(self, max_size=DEFAULT_MAX_MESSAGE_SIZE):
        if max_size <= 0:
            raise ValueError("max_size must be positive")
        self.max_size = max_size
        self._buf = bytearray()
        self._discarding = False
        self._discard_size = 0
        self._head = b""
        self._tail = b""
        self.first = [None]
        self.ready = collections.deque()
        self._pending = None
        self._source = None  # the pure twin's reads of _source_fd (see read)
        self._source_fd = -1
        self._poller, self._poll_fd, self._eager, self._big = None, -1, True, False  # waits (wait_message), reads (read)

    @property
    def buffered(self):
        """Bytes held for the message not yet complete."""
        return len(self._buf)

    def pop(self):
        """Messages already complete (left over from a feed that raised)."""
        first = self.first
        out = [] if first[0] is None else [first[0]]
        out.extend(self.ready)
        first[0] = None
        self.ready.clear()
        return out

    def feed(self, data):
        self._frame(data)
        return self.pop()

    def promote(self):
        """Move the oldest message of ``ready`` to ``first`` when ``first`` is empty (with
        no call: see the class)."""
        ready = self.ready
        first = self.first
        if first[0] is None and ready:
            first[0] = ready[0]
            del ready[0]

    def read(self, fd):
        """Read what the file ``fd`` (non-blocking) holds, up to 64 KiB, and frame it.
        Returns 1 after a read, 0 at the end of the stream, -1 when there is nothing to
        read (BlockingIOError, caught here: cheaper than through C); raises what else
        reading raises, and :class:`FrameTooLarge`."""
        data = self._pending
        if data is None and _COMPILED:
            # one read(2), the GIL kept (a non-blocking pipe never waits): a small one into the
            # module's buffer, copied out, a big one (as the last was) into bytes of its own; one
            # whole message with nothing held before it is kept as it is (see _cpipes.pxd)
            first = self.first
            lone = self.max_size if first[0] is None and not self.ready and not self._buf and not self._discarding else 0
            data = _read(fd, lone, self._big, cython.address(state))
            if state < 1:
                return state
            self._big = len(data) > _SMALL
            if state == 2:  # (_frame's first case and its commit, with no split)
                first[0] = data
                return 1
            self._pending = data
        if data is None:
            try:  # a for step reads: no signal check between the read and the keeping
                if self._source_fd != fd:
                    self._source = iter(functools.partial(os.read, fd, _CHUNK), b"")
                    self._source_fd = fd
                data = b""
                for data in self._source:
                    break
            except BlockingIOError:
                return -1
            if not data:
                return 0
            self._pending = data  # no call since the read: see the class
        self._frame(data)
        return 1

    def wait_message(self, fd, timeout):
        """Read the non-blocking file ``fd`` until a message is whole in ``first``, waiting up to
        ``timeout`` s in all (None: no bound): 1, 0 at the end of the stream, -1 when none came
        in time. Compiled, reads come first (one that finds nothing costs no exception in C)
        and waits are poll(2)s with the GIL let go; the pure twin reads first only while
        waits end at once."""
        first = self.first
        deadline = -1.0
        eager = _COMPILED or self._eager
        while True:
            if not eager:
                started = _c_monotonic() if _COMPILED else time.monotonic()
                left = timeout
                if timeout is not None:
                    if deadline < 0.0:
                        deadline = started + timeout
                    else:
                        left = deadline - started
                        if left <= 0.0:
                            return -1
                if _COMPILED:
                    _poll_in(fd, -1 if left is None else _millis(left))
                else:
                    if self._poll_fd != fd:
                        self._poller = select.poll()
                        self._poller.register(fd, select.POLLIN)
                        self._poll_fd = fd
                    self._poller.poll(None if left is None else left * 1000.0 if left > 0.0 else 0.0)
                    self._eager = time.monotonic() - started < _INSTANT
            n = self.read(fd)
            if n == 0:
                return 0
            if n > 0 and first[0] is not None:
                return 1
            eager = self._eager = False  # nothing in yet (a wake with nothing to read), or a part of a message: wait

    def _frame(self, data):
        # frames ``data`` after the bytes held; committed at the end with no call (see the class)
        buf = self._buf
        n = len(data)
        out = []
        if n > 1 and data[n - 1] == 10 and not buf and not self._discarding and n <= self.max_size:
            # the usual read: whole messages, nothing held from the read before: one split
            # (the last piece is the empty one after the final newline)
            for frame in data.split(b"\n"):
                frame = _without_cr(frame)
                if _worth_keeping(frame):
                    out.append(frame)
            rest = out[1:] if len(out) > 1 else None
            # the commit: no call from here to the end
            first = self.first
            if first[0] is None and not self.ready and out:
                first[0] = out[0]
                if rest is not None:
                    self.ready += rest
            else:
                self.ready += out
            self._pending = None
            return
        error = None
        discarding = self._discarding
        discard_size = self._discard_size
        head = self._head
        tail = self._tail
        held = len(buf)  # bytes of buf that start the next line (0 once used)
        drop = False  # buf was used: emptied at the commit
        rest = b""  # what buf gets at the commit
        start = 0
        while start < n:
            nl = data.find(b"\n", start)
            if discarding:
                stop = n if nl < 0 else nl
                discard_size += stop - start
                tail = (tail + data[max(start, stop - _EDGE):stop])[-_EDGE:]
                if nl < 0:
                    break
                discarding = False
                start = nl + 1
                if error is None:
                    error = FrameTooLarge(discard_size, self.max_size, head, tail)
                continue
            if nl < 0:
                size = held + (n - start)
                if size > self.max_size:
                    before = bytes(buf) if held else b""
                    head = (before[:_EDGE] + data[start:start + _EDGE])[:_EDGE]
                    tail = (before[-_EDGE:] + data[max(start, n - _EDGE):n])[-_EDGE:]
                    discarding = True
                    discard_size = size
                    drop = held > 0
                    held = 0
                else:
                    rest = data[start:]
                break
            if held:
                frame = b"".join((buf, data[start:nl]))
                drop = True
                held = 0
            else:
                frame = data[start:nl]
            start = nl + 1
            frame = _without_cr(frame)
            if len(frame) > self.max_size:
                if error is None:
                    error = FrameTooLarge(len(frame), self.max_size, frame[:_EDGE], frame[-_EDGE:])
            elif _worth_keeping(frame):
                out.append(frame)
        after = out[1:] if len(out) > 1 else None
        # the commit: no call from here to the end
        if drop:
            del buf[:]
        buf += rest
        self._discarding = discarding
        self._discard_size = discard_size
        self._head = head
        self._tail = tail
        first = self.first
        if first[0] is None and not self.ready and out:
            first[0] = out[0]
            if after is not None:
                self.ready += after
        else:
            self.ready += out
        self._pending = None
        if error is not None:
            raise error

    def reset(self):
        del self._buf[:]
        self._discarding = False
        self._pending = None
        self.first[0] = None
        self.ready.clear()





class PipeEnds:
    """The two ends of a server's pipes, the ways a call uses on each (stdio's transport
    is made on it): :meth:`send` writes a message, :meth:`wait_first` reads until the next
    is whole (the transport's ``receive_alone`` takes it). Compiled, the usual case of
    each is one call into C, with no Python frame.

    What only the transport knows comes from its own methods, each on a way a call
    rarely takes: ``_wait_turn(timeout)`` (the right to write, taken by another writer),
    ``_write_rest(fd, message, written, timeout)`` (a full pipe), ``_not_open()``,
    ``_gone_while_sending()``, ``_not_readable()``, ``_eof_error()`` (each the error to raise),
    ``_read_failed(exc)`` (raises what a failed read means, or returns: read again), ``_wake_idle()`` and
    ``_close_output()``; and from its fields (set by its constructor): the framer and its
    ``_first``/``_ready``, ``_wait_message`` (the framer's, or a test's stand-in), the
    write baton ``_wbaton`` and its waiters ``_wwaiters`` (woken by ``_wake_writer``),
    the descriptors, and the ``_closed``/``_reading``/``_spoke`` flags (see the transport).

    The pure build keeps its guarantees against an exception a signal handler raises
    (KeyboardInterrupt) as the transport's methods did: the baton is given back on every
    exit; a message is taken with no call between the take and the return.
    """

    # (the pure build's fields; compiled, the C fields of _cpipes.pxd)
    __slots__ = ("_framer", "_first", "_ready", "_wait_message", "_wbaton", "_wwaiters", "_wake_writer", "_in_fd",
                 "_out_fd", "_closed", "_reading", "_spoke")

    def send(self, message, timeout=None, facts=None):
        """Write ``message`` and its newline, whole, before any other writer's (``facts``
        are for transports that read them)."""
        baton = self._wbaton
        # The right to write, with no lock section. CPython runs signal handlers only at
        # calls and backward jumps: an exception one raises right after the pop is caught
        # with the baton in hand and gives it back; later ones meet the finally, which
        # gives it back first.
        try:
            baton.pop()
        except IndexError:
            self._wait_turn(timeout)  # returns holding it
        except BaseException:
            baton.append(True)
            raise
        try:
            fd = self._in_fd
            if self._closed or fd < 0:
                raise self._not_open()
            try:
                n = write_line(fd, message)  # the message and its newline: the pipe has room for both, usually
            except (OSError, ValueError) as exc:
                raise self._gone_while_sending() from exc
            if n <= len(message):
                self._write_rest(fd, message, n, timeout)
        finally:
            baton.append(True)
            if self._wwaiters:
                self._wake_writer(self._wwaiters)

    def wait_first(self, timeout):
        """Read, waiting up to ``timeout`` s (None: no bound), until a message is whole in
        ``_first[0]``: True, or False when none came in time. For a caller that sees to it
        that nobody else reads meanwhile (no lock taken); the transport's ``close`` may
        come from any thread at any time. The caller takes the message itself, with no
        call between the take and its return (compiled, this returns through a call, after
        which CPython may run a signal handler: what it read stays in ``_first`` until taken)."""
        first = self._first
        if first[0] is not None:
            return True
        if self._ready:
            self._framer.promote()
            return True
        self._reading = True  # before the look at _closed: see the transport's close()
        try:
            while True:  # (once, unless no time bounds the wait)
                fd = self._out_fd
                if self._closed or fd < 0:
                    raise self._not_readable()
                try:  # reads, and waits while nothing is in, until a message is whole or the time is up
                    n = self._wait_message(fd, timeout)
                except (OSError, ValueError, FrameTooLarge) as exc:
                    self._read_failed(exc)  # raises what it means, or returns: read again
                    continue
                if n > 0:
                    self._spoke = True
                    if self._ready:
                        self._wake_idle()  # messages framed already: a paused watch would not see them
                    return True
                if n == 0:
                    raise self._eof_error()
                if timeout is not None and not self._closed:
                    return False
        finally:
            self._reading = False
            if self._closed:
                self._close_output()  # close() left it to this reader (or came meanwhile)


# ------------------------------------------------------------------ the idle watch's switch


class EpollSwitch:
    """Turns ``fd``'s watch in ``epoll`` (a ``select.epoll``) on (EPOLLIN) and off (no
    events), as ``epoll.modify`` does: :meth:`turn`. Compiled, that is one epoll_ctl that
    keeps the GIL (``modify`` drops and retakes it, but epoll_ctl on our own set never
    blocks), called from C by :class:`IdleGate`; without epoll it fails with ENOSYS.

    The switch keeps the epoll's number, so the epoll must be closed through
    :meth:`close`: it forgets the number before the epoll closes it, and a turn runs whole
    under the GIL, so a number another file has since been given is never touched.
    """

    def __init__(self, epoll, fd):
        self._epoll = epoll
        self._epfd = epoll.fileno()
        self._fd = fd

    def close(self):
        """Close the epoll (idempotent); a turn fails with EBADF from then on."""
        self._epfd = -1
        self._epoll.close()

    def turn(self, on):
        """Watch for input (``on``) or not: 0 when done, else the errno (raises nothing:
        a failed turn means the transport is closing, which its readers report)."""
        if self._epfd < 0:
            return errno.EBADF
        if _COMPILED:
            return _epoll_turn(self._epfd, self._fd, on)  # declared in _cpipes.pxd: compiled only
        try:
            self._epoll.modify(self._fd, select.EPOLLIN if on else 0)
        except OSError as exc:
            return exc.errno
        except ValueError:  # closed behind the switch's back
            return errno.EBADF
        return 0


class IdleGate:
    """A dispatcher's last activity (``last``, on ``clock``) and its transport's idle
    watch (``switch``, an :class:`EpollSwitch`, or None), one call into C at each end of a
    call in the compiled build (see ``Dispatcher.request`` and ``Dispatcher._lead``).

    ``arrive(now)``: a caller starts a request at ``now``. After ``grace`` s with no
    activity the background thread waits in the watch, so it is turned off first, then
    ``paused`` set; ``last`` becomes ``now``. ``leave()``: the leader let go (it put the
    read baton back itself, first: see ``Dispatcher._lead``): ``last`` becomes the time,
    then a paused watch goes on again (``paused`` cleared first), so it is never off with
    ``paused`` false. A turn that fails means the transport is closing, which its readers
    report: ignored. Compiled, each runs whole under the GIL.
    """

    def __init__(self, switch, grace, clock):
        self._switch = switch
        self._grace = grace
        self._clock = clock
        self.last = clock()
        self.paused = False

    def arrive(self, now):
        if now - self.last >= self._grace and not self.paused and self._switch is not None:
            self._switch.turn(False)
            self.paused = True
        self.last = now

    def leave(self):
        self.last = self._clock()
        if self.paused:
            self.paused = False
            self._switch.turn(True)
