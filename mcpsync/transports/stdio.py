"""stdio: the server is a child process; newline-delimited JSON-RPC on stdin/stdout.

The child's stderr is drained continuously into :mod:`logging` (logger
``mcpsync.stderr.<name>``), so a chatty server can never fill the pipe and stall; its
last lines are kept for error messages. Shutdown follows the MCP specification: close
stdin, wait, then SIGTERM, wait, then SIGKILL; the child is always reaped.

Example:
    >>> t = StdioTransport("python", ["-m", "mcpsync.server.demo"])   # doctest: +SKIP
    >>> t.connect(timeout=10)                                           # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import collections
import errno
import logging
import os
import select
import subprocess
import threading
import time
import weakref
from typing import Mapping, Sequence

from .._errors import ConnectError, ConnectionClosed, MessageTooLarge, RequestTimeout
from .._speedups import DEFAULT_MAX_MESSAGE_SIZE, FrameTooLarge, LineFramer
from ._base import Transport

__all__ = ["StdioTransport"]

log = logging.getLogger("mcpsync.transports.stdio")

_LIVE: "weakref.WeakSet[StdioTransport]" = weakref.WeakSet()
_STDERR_KEEP = 20
_monotonic = time.monotonic
#: A wait for output that ends sooner than this found it there already.
_INSTANT = 5e-6


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
        t._closed = True
        t._rlock = threading.Lock()  # a parent thread may have held it
    _LIVE.clear()


os.register_at_fork(after_in_child=_drop_pipes_in_child)


class StdioTransport(Transport):
    """Runs an MCP server as a child process and talks to it over its stdio.

    Args:
        command: the executable.
        args: its arguments.
        env: extra environment variables (merged over the parent's unless
            ``inherit_env`` is False).
        cwd: working directory of the child.
        max_message_size: longest accepted message in bytes.
        close_timeout: seconds to wait at each shutdown step.
        name: used for the stderr logger (default: the command's base name).
    """

    kind = "stdio"

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = True,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        close_timeout: float = 2.0,
        name: str | None = None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = dict(env or {})
        self.cwd = cwd
        self.inherit_env = inherit_env
        self.max_message_size = max_message_size
        self.close_timeout = close_timeout
        self.name = name or os.path.basename(command)
        self._proc: subprocess.Popen[bytes] | None = None
        self._framer = LineFramer(max_message_size)
        self._ready: collections.deque[bytes] = collections.deque()
        self._wlock = threading.Lock()
        # held while reading the output pipe: close() never closes that descriptor under
        # a reader, whose next os.read would otherwise hit whatever pipe reuses its number
        # (another server's output, stolen from its reader)
        self._rlock = threading.Lock()
        self._eager = True  # read before waiting (see _read); under _rlock
        self._closed = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_KEEP)
        self._stderr_thread: threading.Thread | None = None
        self._out_fd = -1
        self._in_fd = -1
        self._poller = select.poll()  # watches _out_fd once connected
        self._pid_owner = os.getpid()

    # ------------------------------------------------------------------ lifecycle

    def describe(self) -> str:
        return " ".join([self.command, *self.args])

    def connect(self, timeout: float = 10.0) -> None:
        env = {**os.environ, **self.env} if self.inherit_env else dict(self.env)
        try:
            proc = subprocess.Popen(
                [self.command, *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=env,
                cwd=self.cwd,
                close_fds=True,
            )
        except OSError as exc:
            raise ConnectError(f"could not start MCP server {self.describe()!r}: {exc.strerror or exc}") from exc
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._in_fd = proc.stdin.fileno()
        self._out_fd = proc.stdout.fileno()
        self._poller.register(self._out_fd, select.POLLIN)
        os.set_blocking(self._in_fd, False)
        os.set_blocking(self._out_fd, False)  # a read never blocks past its wait
        self._stderr_thread = threading.Thread(
            target=self._drain_stderr, args=(proc.stderr,), name=f"mcpsync-stderr-{self.name}", daemon=True
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
        return list(self._stderr_tail)

    def _drain_stderr(self, stream: "subprocess.IO[bytes]") -> None:  # type: ignore[name-defined]
        logger = logging.getLogger(f"mcpsync.stderr.{self.name}")
        try:
            for line in iter(stream.readline, b""):
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                self._stderr_tail.append(text)
                logger.info("%s", text)
        except (OSError, ValueError):
            pass

    def _exit_detail(self) -> str:
        proc = self._proc
        parts = []
        if proc is not None:
            try:
                code = proc.wait(0.2)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                parts.append(f"exit code {code}")
                drain = self._stderr_thread
                if drain is not None and drain is not threading.current_thread():
                    drain.join(0.5)  # the child is gone: its last stderr lines are on their way
        if self._stderr_tail:
            parts.append("stderr: " + " | ".join(list(self._stderr_tail)[-3:]))
        return f" ({'; '.join(parts)})" if parts else ""

    def close(self, timeout: float | None = None) -> None:
        with self._wlock:
            if self._closed:
                return
            self._closed = True
        _LIVE.discard(self)
        proc = self._proc
        if proc is None:
            return
        if os.getpid() != self._pid_owner:
            return  # a forked child must not shut down its parent's server
        wait = self.close_timeout if timeout is None else timeout
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            if proc.stderr is not None:
                proc.stderr.close()
        except OSError:
            pass
        # the output pipe: now, unless a reader is inside receive(); it then closes the
        # pipe itself on its way out (it saw _closed, set above, before releasing)
        if self._rlock.acquire(False):
            try:
                self._close_output()
            finally:
                self._rlock.release()
        if self._stderr_thread is not None:
            self._stderr_thread.join(1.0)

    # ------------------------------------------------------------------ I/O

    def send(self, message: bytes, timeout: float | None = None) -> None:
        data = message + b"\n"
        lock = self._wlock
        lock.acquire()  # not ``with``: on CPython 3.11 that costs over twice as much
        try:
            if self._closed or self._proc is None:
                raise ConnectionClosed(f"stdio server {self.name} is closed", sent=False)
            fd = self._in_fd
            try:
                n = os.write(fd, data)  # the pipe has room for a whole message, usually
            except BlockingIOError:
                n = 0
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise self._gone_while_sending() from exc
            if n < len(data):
                self._write_rest(fd, memoryview(data)[n:], timeout)
        finally:
            lock.release()

    def _write_rest(self, fd: int, view: memoryview, timeout: float | None) -> None:
        # under _wlock: the pipe is full; wait for room, up to the timeout
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

    def _wait_readable(self, fd: int, timeout: float | None) -> bool:
        # holding _rlock, so the poll object is never used concurrently; poll is about
        # half the price of select here
        return bool(self._poller.poll(None if timeout is None else max(timeout, 0.0) * 1000.0))

    def _close_output(self) -> None:
        # holding _rlock: nobody is between a wait and an os.read on the descriptor
        fd, self._out_fd = self._out_fd, -1
        if fd < 0:
            return
        try:
            self._poller.unregister(fd)
        except (KeyError, ValueError):
            pass
        proc = self._proc
        try:
            if proc is not None and proc.stdout is not None:
                proc.stdout.close()
        except OSError:
            pass

    def receive(self, timeout: float | None) -> bytes | None:
        ready = self._ready
        if ready:
            return ready.popleft()
        rlock = self._rlock
        # one reader at a time (the dispatcher's rule; a second one waits its turn)
        if not rlock.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            return None
        try:
            if self._closed:
                raise ConnectionClosed(f"stdio server {self.name} was closed")
            if ready:
                return ready.popleft()
            fd = self._out_fd
            if fd < 0:
                raise ConnectionClosed(f"stdio server {self.name} is not connected")
            return self._read(fd, ready, timeout)
        finally:
            if self._closed:
                self._close_output()  # close() left it to this reader
            rlock.release()

    def _read(self, fd: int, ready: "collections.deque[bytes]", timeout: float | None) -> bytes | None:
        # holding _rlock: wait and read until a whole message is in, or the time is up.
        # The pipe is non-blocking. While output tends to be in already by the time a
        # reader comes (client and server share a CPU; many callers), it is read with no
        # wait first, saving the poll; a read that finds nothing goes back to waiting
        # first, until a wait again ends at once.
        deadline = None
        eager = self._eager
        while True:
            if not eager:
                if self._closed:
                    raise ConnectionClosed(f"stdio server {self.name} was closed")
                if timeout is not None:
                    if deadline is None:
                        deadline = _monotonic() + timeout
                    else:
                        timeout = deadline - _monotonic()
                        if timeout <= 0:
                            return None
                started = _monotonic()
                try:
                    self._wait_readable(fd, timeout)
                except (OSError, ValueError) as exc:
                    raise ConnectionClosed(f"stdio server {self.name} is gone{self._exit_detail()}") from exc
                self._eager = eager = _monotonic() - started < _INSTANT
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:  # nothing in yet, or a wake with nothing to read
                self._eager = eager = False
                continue
            except (OSError, ValueError) as exc:
                if isinstance(exc, OSError) and exc.errno == errno.EINTR:
                    continue
                raise ConnectionClosed(f"stdio server {self.name} is gone{self._exit_detail()}") from exc
            if not chunk:
                if self._closed:
                    raise ConnectionClosed(f"stdio server {self.name} was closed")
                raise ConnectionClosed(f"stdio server {self.name} closed its output{self._exit_detail()}")
            try:
                frames = self._framer.feed(chunk)
            except FrameTooLarge as exc:
                ready.extend(self._framer.pop())
                raise MessageTooLarge(
                    f"message from {self.name} exceeds {self.max_message_size} bytes", head=exc.head, tail=exc.tail, size=exc.size
                ) from None
            if frames:
                if len(frames) > 1:
                    ready.extend(frames[1:])
                return frames[0]
            eager = False  # a part of a message: wait for the rest
