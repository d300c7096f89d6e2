"""stdio: the server is a child process; newline-delimited JSON-RPC on stdin/stdout.

The child's stderr is drained continuously, in 64 KiB reads (lines are split here, so a
server is never slowed by its own logging), into :mod:`logging` (logger
``mcpsync.stderr.<name>``, INFO), at most ``stderr_log_rate`` lines a second: a flood is
summarised by one line saying how many lines were left out. The last lines (each cut to
a few hundred characters) are kept for error messages. Shutdown follows the MCP
specification: close stdin, wait, then SIGTERM, wait, then SIGKILL; the child is always
reaped. A child that already closed its output is past helping: it gets only a short
grace before SIGTERM, so a broken connection is discarded at once.

A command that cannot be run (missing, not executable) raises
:class:`~mcpsync.StartFailed` from :meth:`StdioTransport.connect`; a process that exits
(or closes its output) before answering is reported by
:meth:`StdioTransport.start_failure` with its exit code and last stderr lines.

Example:
    >>> t = StdioTransport("python", ["-m", "mcpsync.server.demo"])   # doctest: +SKIP
    >>> t.connect(timeout=10)                                           # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import select
import subprocess
import threading
import time
import weakref
from typing import Any, Callable, Mapping, Sequence

from .._errors import ConnectError, ConnectionClosed, MessageTooLarge, RequestTimeout, StartFailed
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE, EpollSwitch, FrameTooLarge, LineFramer, PipeEnds
from ._base import Transport
from ._spawn import Group as _Group
from ._spawn import popen
from ._spawn import server_environment as _server_environment
from ._spawn import stop as _stop
from ._stderr import Tail as _Tail
from ._stderr import drain as _drain
from ._turns import take_turn, wake_first

__all__ = ["StdioTransport"]

log = logging.getLogger("mcpsync.transports.stdio")

_LIVE: "weakref.WeakSet[StdioTransport]" = weakref.WeakSet()
#: stderr lines kept for error messages (the longest part of a line kept: _stderr.STDERR_LINE_MAX)
_STDERR_KEEP = 20
#: after the output hit EOF, how long to wait for the exit status for an error message
_EXIT_WAIT = 0.1
#: a child that closed its output gets this long after EOF on stdin before SIGTERM
_BROKEN_GRACE = 0.1
#: errno values of a command that can never run (retrying would not help)
_PERMANENT_SPAWN_ERRORS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.ENOTDIR, errno.EISDIR})
_monotonic = time.monotonic
#: the idle watch can be paused (Linux); elsewhere it is a plain poll that ignores pauses
_EPOLL = hasattr(select, "epoll") and hasattr(os, "eventfd")
#: each server in a process group (session) of its own, ended as a whole (POSIX)
_GROUPS = os.name == "posix"


def _close_all_at_exit() -> None:
    for t in list(_LIVE):
        try:
            t.close(timeout=0.5)
        except Exception:  # pragma: no cover - best effort at exit
            pass


atexit.register(_close_all_at_exit)


def _drop_pipes_in_child() -> None:
    # A forked child must not keep its parent's servers alive: holding copies of their
    # stdin would stop the parent's close() from ending them with EOF. Close the
    # child's copies only; the processes belong to the parent.
    for t in list(_LIVE):
        proc = t._proc
        if proc is None:
            continue
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        t._out_fd = t._in_fd = -1
        t._out_claim = []
        t._reading = False
        t._closed = True
        t._rlock = threading.Lock()  # a parent thread may have held it (or the ones below)
        t._wbaton, t._wwaiters = [True], []
    _LIVE.clear()


os.register_at_fork(after_in_child=_drop_pipes_in_child)


def _close_claimed(claim: list[int]) -> None:
    """Close the descriptor in ``claim`` unless another thread popped it first: whoever
    pops it closes it, exactly once (``list.pop`` is atomic under the GIL)."""
    try:
        fd = claim.pop()
    except IndexError:
        return
    try:
        os.close(fd)
    except OSError:
        pass


class StdioTransport(PipeEnds, Transport):
    """Runs an MCP server as a child process and talks to it over its stdio.

    Args:
        command: the executable.
        args: its arguments.
        env: environment variables for the server, over a minimal environment
            (:data:`~mcpsync.transports._spawn.DEFAULT_ENV_VARS`: HOME, LOGNAME, PATH,
            SHELL, TERM, USER), or over the whole of this process's with ``inherit_env``.
        inherit_env: hand the server this process's whole environment (API keys included).
        cwd: working directory of the child.
        max_message_size: longest accepted message in bytes.
        close_timeout: seconds to wait at each shutdown step.
        name: used for the stderr logger (default: the command's base name).
        stderr_log_rate: most stderr lines logged per second; the lines over it are
            counted and reported in one summary line (they still reach the tail).
    """

    kind = "stdio"
    # what a call reads and writes (the framer, the pipes' ends, the write baton, the
    # flags a reader shares with close()) is PipeEnds', compiled: its send() and
    # receive_alone() are the calls' ways (the rest are slots: CPython keeps at most 30
    # attributes in an instance's own values, past that each access goes through a dict)
    __slots__ = (
        "command", "args", "env", "cwd", "inherit_env", "max_message_size", "close_timeout", "name", "stderr_log_rate",
        "_proc", "_rlock", "_out_claim", "_stderr_tail", "_stderr_thread", "_stderr_stop", "_stderr_wake", "_eof",
        "_exit_code", "_broken_before_close", "_idle_poller", "idle_switch", "_idle_wake",
        "_pid_owner", "_group", "_wake_claim", "_stderr_claim", "_watching", "next_message",
    )

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = False,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        close_timeout: float = 2.0,
        name: str | None = None,
        stderr_log_rate: int = 50,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.cwd = cwd
        self.inherit_env = inherit_env
        self.max_message_size = max_message_size
        self.close_timeout = close_timeout
        self.name = name or os.path.basename(command)
        self.stderr_log_rate = stderr_log_rate
        self._proc: subprocess.Popen[bytes] | None = None
        self._framer = LineFramer(max_message_size)
        # complete messages not yet received: the framer's first, then the rest (see LineFramer.read)
        self._first, self._ready = self._framer.first, self._framer.ready
        #: the framer's first message, filled by wait_first (see Transport.next_message and receive_alone)
        self.next_message: list[bytes | None] | None = self._first
        # The right to write to the input pipe, so that messages never interleave (a partial
        # write goes on holding it): popped from _wbaton by the writer, put back after (see
        # send). A writer that finds it taken waits its turn in _wwaiters (see _turns).
        self._wbaton = [True]
        self._wwaiters: list[threading.Lock] = []
        self._wake_writer = wake_first
        # receive(): one reader at a time (receive_alone's callers see to that themselves)
        self._rlock = threading.Lock()
        # True while a reader is between its look at _closed and its last use of the output
        # pipe: close() then leaves closing the pipe to that reader, whose next os.read
        # would otherwise hit whatever pipe reuses the number (another server's output,
        # stolen from its reader). Whoever closes the pipe first pops its number from
        # _out_claim (list.pop is atomic under the GIL): it is closed exactly once.
        self._reading = False
        self._out_claim: list[int] = []
        #: the one reader's waits and reads of the output pipe until a message is whole
        #: (LineFramer.wait_message; a slot of its own, for tests to step in)
        self._wait_message: Callable[[int, float | None], int] = self._framer.wait_message
        self._closed = False
        self._stderr_tail = _Tail(_STDERR_KEEP)
        self._stderr_thread: threading.Thread | None = None
        # set by close() to a monotonic time: the stderr reader leaves when woken (or at its
        # next idle poll), or at that time if output keeps coming (a grandchild holding the pipe)
        self._stderr_stop = 0.0
        self._stderr_wake = -1  # an eventfd close() writes to end the stderr reader's idle wait (Linux)
        self._spoke = False  # the child wrote something to stdout (set by the reader)
        self._eof = False  # the reader saw EOF on the child's stdout
        self._exit_code: int | None = None  # an exit the child made on its own (see close())
        self._broken_before_close = False  # EOF or exit seen before close() began
        self._out_fd = -1
        self._in_fd = -1
        # wait_readable's own watch of _out_fd (used without _rlock), an epoll set
        self._idle_poller: Any = None
        #: turns that watch off and on (epoll only): the dispatcher's IdleGate turns it off
        #: for a caller that reads its own answer after an idle gap, so the answer wakes no
        #: thread waiting in wait_readable, and on again when nobody reads
        self.idle_switch: EpollSwitch | None = None
        self._idle_wake = -1  # an eventfd in that set: _wake_idle's, for frames already read
        self._pid_owner = os.getpid()
        self._group: _Group | None = None
        self._wake_claim: list[int] = []  # _idle_wake's number until closed (see _close_claimed)
        self._stderr_claim: list[int] = []  # _stderr_wake's, the same
        self._watching = False  # a wait_readable is inside (it then closes _idle_wake on its way out)

    # ------------------------------------------------------------------ lifecycle

    def describe(self) -> str:
        return " ".join([self.command, *self.args])

    def connect(self, timeout: float = 10.0) -> None:
        if self._closed:  # closed before it started (a client closed while connecting)
            raise ConnectionClosed(f"stdio transport to {self.describe()!r} is closed")
        env = _server_environment(self.env, inherit=self.inherit_env)
        try:
            proc = popen(  # a child that dies with this process, even on SIGKILL (Linux)
                [self.command, *self.args],
                timeout=max(timeout, 1.0),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=env,
                cwd=self.cwd,
                close_fds=True,
                start_new_session=_GROUPS,  # its own group: a terminal's Ctrl-C reaches the client only
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.filename is not None and exc.filename != self.command:
                reason = f"{reason}: {exc.filename!r}"
            message = f"could not start MCP server {self.describe()!r}: {reason}"
            if exc.errno == errno.ENOENT and " " in self.command and not self.args:
                message += "; the command names one program: give its arguments as a list (args=[...])"
            if exc.errno in _PERMANENT_SPAWN_ERRORS:
                raise StartFailed(message, command=self.describe(), exit_code=None, stderr_tail="") from exc
            raise ConnectError(message) from exc  # e.g. out of descriptors or memory: may pass
        self._proc = proc
        self._group = _Group(proc, self.close_timeout) if _GROUPS else None  # ended with the client, however it ends
        if self._closed:  # close() ran while the process was being made: it must not live on
            _stop(proc, self._group, 0.0)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            raise ConnectionClosed(f"stdio transport to {self.describe()!r} is closed")
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._in_fd = proc.stdin.fileno()
        self._out_claim = [proc.stdout.fileno()]
        self._out_fd = proc.stdout.fileno()
        try:
            if _EPOLL:
                self._idle_poller = select.epoll()
                self._idle_poller.register(self._out_fd, select.EPOLLIN)
                self.idle_switch = EpollSwitch(self._idle_poller, self._out_fd)  # (which closes the epoll)
                # each eventfd closed once its last user is done (never under one: a number reused
                # by another file must never be written to), at close(); else with the object
                self._idle_wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
                self._wake_claim = [self._idle_wake]
                weakref.finalize(self, _close_claimed, self._wake_claim)
                self._idle_poller.register(self._idle_wake, select.EPOLLIN)
                self._stderr_wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # the same for close()
                self._stderr_claim = [self._stderr_wake]
                weakref.finalize(self, _close_claimed, self._stderr_claim)
            else:
                self._idle_poller = select.poll()
                self._idle_poller.register(self._out_fd, select.POLLIN)
        except OSError as exc:  # e.g. out of descriptors (EMFILE): the server started must not live on
            if self.idle_switch is not None:
                self.idle_switch.close()
            _close_claimed(self._wake_claim)
            _close_claimed(self._stderr_claim)
            _stop(proc, self._group, 0.0)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                pipe.close()
            raise ConnectError(f"could not start MCP server {self.describe()!r}: {exc.strerror or exc}") from exc
        os.set_blocking(self._in_fd, False)
        os.set_blocking(self._out_fd, False)  # a read never blocks past its wait
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, args=(proc.stderr,), name=f"mcpsync-stderr-{self.name}-{proc.pid}", daemon=True
        )
        self._stderr_thread.start()
        _LIVE.add(self)

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and not self._closed and proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr."""
        return self._stderr_tail.lines()

    def starting(self) -> bool:
        """True while the child runs and has written nothing at all to its stdout yet."""
        proc = self._proc
        return proc is not None and not (self._closed or self._spoke or self._eof) and proc.poll() is None

    def start_failure(self, wait: float = 0.0) -> StartFailed | None:
        """A :class:`StartFailed` when the child can never answer, else None.

        The child can never answer once it exited, or closed its stdout (the reader saw
        EOF). After EOF the exit status is waited for up to ``wait`` seconds, so the
        error can name it. After :meth:`close`, only what happened before the close
        counts: a child that close() itself stopped did not fail to start.

        Args:
            wait: the longest wait (seconds) for the exit status once stdout hit EOF.
        """
        proc = self._proc
        if proc is None:
            return None  # never spawned: connect() raised already
        if self._closed:
            if not self._broken_before_close:
                return None
            code = self._exit_code
        else:
            code = proc.poll()
            if code is None:
                if not self._eof:
                    return None  # alive and its output open: it may yet answer
                try:
                    code = proc.wait(max(wait, 0.0))
                except subprocess.TimeoutExpired:
                    code = None
        if code is not None:
            self._join_stderr(0.5)  # the child is gone: its last stderr lines are on their way
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        else:
            how = "closed its output and stopped answering (still running)"
        message = f"MCP server {self.describe()!r} {how} before answering"
        if self._stderr_tail:  # every line kept: the reason may be any of them (npm's "404 Not Found")
            message += "; stderr: " + self._stderr_tail.summary(_STDERR_KEEP)
        return StartFailed(message, command=self.describe(), exit_code=code, stderr_tail="\n".join(self.stderr_tail()))

    def _join_stderr(self, timeout: float) -> None:
        drain = self._stderr_thread
        if drain is not None and drain is not threading.current_thread():
            drain.join(timeout)

    def _drain_stderr(self, stream: "subprocess.IO[bytes]") -> None:  # type: ignore[name-defined]
        # this thread owns the pipe (see _stderr.drain); and the wake, unless close() holds it
        try:
            _drain(stream, logging.getLogger(f"mcpsync.stderr.{self.name}"), self.stderr_log_rate, self._stderr_tail,
                   self._stderr_wake, lambda: self._stderr_stop)
        finally:
            _close_claimed(self._stderr_claim)

    def _exit_detail(self) -> str:
        proc = self._proc
        parts = []
        if proc is not None:
            try:
                code = proc.wait(_EXIT_WAIT)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                parts.append(f"exit code {code}")
                self._join_stderr(0.5)  # the child is gone: its last stderr lines are on their way
        if self._stderr_tail:
            parts.append("stderr: " + self._stderr_tail.summary(3))
        return f" ({'; '.join(parts)})" if parts else ""

    def close(self, timeout: float | None = None) -> None:
        wait = self.close_timeout if timeout is None else timeout
        baton: list[bool] | None = self._wbaton
        try:  # no message is half written when the input closes (the baton as in send)
            baton.pop()  # type: ignore[union-attr]
        except IndexError:
            try:
                take_turn(self._wbaton, self._wwaiters, wait, f"stdio server {self.name}")
            except RequestTimeout:  # a writer stuck on a full pipe: its pipe stays open, the server is stopped
                baton = None
        except BaseException:
            baton.append(True)  # type: ignore[union-attr]
            raise
        try:
            if self._closed:
                return
            self._closed = True
        finally:
            if baton is not None:
                baton.append(True)
                if self._wwaiters:
                    wake_first(self._wwaiters)
        _LIVE.discard(self)
        proc = self._proc
        if proc is None:
            return
        if os.getpid() != self._pid_owner:
            return  # a forked child must not shut down its parent's server
        # what the child did on its own, before this close (start_failure reports it)
        code = proc.poll()
        broken = self._eof or code is not None
        self._broken_before_close = broken
        self._exit_code = code
        if baton is None:  # (a number closed under a write could be reused by another file)
            log.warning("stdio server %s: a write of another thread still holds its input; stopping it", self.name)
        try:
            if proc.stdin is not None and baton is not None:
                proc.stdin.close()
        except OSError:
            pass
        # then SIGTERM to its whole group, then SIGKILL; a child that closed its output cannot
        # answer anything more, nor one whose input stays held by a stuck writer: no long wait
        first = min(wait, _BROKEN_GRACE) if broken else wait if baton is not None else 0.0
        code = _stop(proc, self._group, wait, first)
        if broken and code is not None:
            self._exit_code = code  # it was on its way out
        self._stderr_stop = _monotonic() + 0.5  # the stderr reader closes its pipe on its way out
        wake = self._stderr_claim.pop() if self._stderr_claim else -1  # (empty: the reader left, closing it)
        if wake >= 0:
            try:
                os.eventfd_write(wake, 1)
            except OSError:
                pass
        # the output pipe: now, unless a reader is inside receive_alone(); it then closes
        # the pipe itself on its way out (it looks at _closed, set above, after it clears
        # _reading; and a reader that comes later sees _closed before it touches the pipe)
        if not self._reading:
            self._close_output()
        self._join_stderr(1.0)
        if wake >= 0:  # back to the reader if it is still there; else closed now
            self._stderr_claim.append(wake)
            if self._stderr_thread is None or not self._stderr_thread.is_alive():
                _close_claimed(self._stderr_claim)

    # ------------------------------------------------------------------ I/O

    # send() and wait_first(): PipeEnds' (compiled); what they ask of the transport, below

    def _wait_turn(self, timeout: float | None) -> None:
        # another writer holds the right to write: wait for it, up to the timeout
        take_turn(self._wbaton, self._wwaiters, timeout, f"stdio server {self.name}")  # returns holding it

    def _not_open(self) -> ConnectionClosed:
        return ConnectionClosed(f"stdio server {self.name} is closed", sent=False)

    def _write_rest(self, fd: int, message: bytes, written: int, timeout: float | None) -> None:
        # holding the right to write: the pipe is full; wait for room, up to the timeout
        view = memoryview(message + b"\n")[written:]
        deadline = None if timeout is None else time.monotonic() + timeout
        while view:
            try:
                n = os.write(fd, view)
                view = view[n:]
            except BlockingIOError:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise RequestTimeout(f"stdio server {self.name} stopped reading its input") from None
                select.select([], [fd], [], remaining)
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise self._gone_while_sending() from exc

    def _gone_while_sending(self) -> ConnectionClosed:
        # the server stopped reading before this message was whole: it cannot have
        # acted on it, so a retry elsewhere duplicates nothing
        return ConnectionClosed(f"stdio server {self.name} is gone{self._exit_detail()}", sent=False)

    def _close_output(self) -> None:
        # after close(), with no reader inside receive_alone (close() saw none, or it is
        # that reader on its way out): whoever comes first closes the pipe
        try:
            fd = self._out_claim.pop()
        except IndexError:
            return
        self._out_fd = -1
        switch = self.idle_switch
        if switch is not None:
            switch.close()  # a wait_readable inside the epoll ends at its timeout, and then sees _closed
        if not self._watching:
            _close_claimed(self._wake_claim)  # (else that wait_readable closes it on its way out)
        proc = self._proc
        try:
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
        except OSError:
            pass

    def wait_readable(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for something to read, reading nothing: True when a
        message is already framed, or output (or EOF) is on the pipe, or the transport
        is closed (a receive then says so). For the dispatcher's idle reader, which thus
        leaves the reading to callers while nothing comes."""
        self._watching = True  # before the look at _closed: see _close_output
        try:
            if self._first[0] is not None or self._ready or self._closed:
                return True
            fd = self._out_fd
            if fd < 0:
                return True
            if not _EPOLL:
                return bool(self._idle_poller.poll(timeout * 1000.0))
            events = self._idle_poller.poll(timeout)
            if len(events) == 1 and events[0][0] == self._idle_wake:
                try:  # _wake_idle's wake: frames wait in _ready
                    os.eventfd_read(self._idle_wake)
                except OSError:
                    pass
            return bool(events)
        finally:
            self._watching = False
            if self._out_fd < 0:
                _close_claimed(self._wake_claim)

    def _wake_idle(self) -> None:
        """Wake a thread in :meth:`wait_readable` for messages framed already: they are no
        longer on the pipe, and a paused watch would not see them."""
        if self._idle_wake >= 0:
            try:
                os.eventfd_write(self._idle_wake, 1)
            except OSError:
                pass

    def receive(self, timeout: float | None) -> bytes | None:
        first = self._first
        data = first[0]  # taken with no call (see receive_alone)
        if data is None and self._ready:
            self._framer.promote()
            data = first[0]
        if data is not None:
            first[0] = None
            return data
        rlock = self._rlock
        # one reader at a time (the dispatcher's rule; a second one waits its turn)
        if not rlock.acquire(True, -1 if timeout is None else timeout if timeout > 0.0 else 0.0):
            return None
        try:
            return self.receive_alone(timeout)
        finally:
            rlock.release()

    def receive_alone(self, timeout: float | None) -> bytes | None:
        """:meth:`receive` for a caller that sees to it that nobody else reads meanwhile
        (neither :meth:`receive` nor this), as the dispatcher's leader does: no lock
        taken. :meth:`close` may still come from any thread at any time.

        No byte read is lost to an exception a signal handler raises (KeyboardInterrupt)
        in the middle: CPython runs handlers only at calls and backward jumps, and every
        message read stays in the framer (:meth:`LineFramer.read`, ``wait_first``) until
        it is taken here, with no call between the take and the return."""
        first = self._first
        data = first[0]
        if data is None and self.wait_first(timeout):  # (PipeEnds': reads until a message is first)
            data = first[0]
        first[0] = None
        return data

    def _not_readable(self) -> ConnectionClosed:
        # (wait_first, PipeEnds') the pipe cannot be read: closed, or never connected
        if self._closed:
            return ConnectionClosed(f"stdio server {self.name} was closed")
        return ConnectionClosed(f"stdio server {self.name} is not connected")

    def _read_failed(self, exc: BaseException) -> None:
        # (wait_first, in its except clause) raise what a failed read means; return: read again (a signal came)
        if isinstance(exc, FrameTooLarge):
            if self._first[0] is not None:
                self._wake_idle()
            raise MessageTooLarge(
                f"message from {self.name} exceeds {self.max_message_size} bytes", head=exc.head, tail=exc.tail, size=exc.size
            ) from None
        if isinstance(exc, OSError) and exc.errno == errno.EINTR:
            return
        raise ConnectionClosed(f"stdio server {self.name} is gone{self._exit_detail()}") from exc

    def _eof_error(self) -> ConnectionClosed:
        # (wait_first) the server closed its output
        self._eof = True
        if self._framer.buffered:
            self._spoke = True  # a part of a message, then the end
        if self._closed:
            return ConnectionClosed(f"stdio server {self.name} was closed")
        return ConnectionClosed(f"stdio server {self.name} closed its output{self._exit_detail()}")
