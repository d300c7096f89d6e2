"""Turns at a baton taken with no lock section: the right to write to a stdio server's
input pipe (:meth:`StdioTransport.send <mcpsync.transports.stdio.StdioTransport.send>`).

The baton is a list of one ``True``: a writer pops it, and puts it back when done. A writer
that finds it taken waits its turn here (:func:`take_turn`); one that puts it back opens the
first waiter's gate (:func:`wake_first`). Both sides are safe against an exception a signal
handler raises (KeyboardInterrupt, a SIGTERM handler's SystemExit): CPython runs handlers
only at calls and backward jumps, so an exception right after a pop is caught with the baton
in hand and gives it back, and every wait is bounded, so a wake such an exception kept from
coming costs one poll, never a wedge.
"""

from __future__ import annotations

import threading
import time

from .._errors import RequestTimeout, seconds

__all__ = ["take_turn", "wake_first", "POLL"]

#: the longest wait of a waiter between two looks at the baton
POLL = 0.05

_monotonic = time.monotonic


def take_turn(baton: list[bool], waiters: list[threading.Lock], timeout: float | None, what: str) -> None:
    """Wait for the baton up to ``timeout`` s and take it; :class:`RequestTimeout` (nothing
    sent) when the time runs out first (``what`` names the pipe in its message).

    The waiter puts its gate (a lock it holds) in ``waiters``, then looks at the baton; a
    writer puts the baton back, then opens the first waiter's gate: one of the two sees the
    other. The waiter leaves ``waiters`` before it takes the baton, and the take is its last
    act: an exception right after it gives the baton back, and nothing can come between the
    return and the caller's try."""
    deadline = None if timeout is None else _monotonic() + timeout
    gate = threading.Lock()
    gate.acquire()
    while True:
        waiters.append(gate)
        try:
            while not baton:
                wait = POLL
                if deadline is not None:
                    left = deadline - _monotonic()
                    if left <= 0:
                        raise RequestTimeout(f"{what}: no turn to write within {seconds(timeout or 0.0)} s (another write holds "
                                             "the pipe)", sent=False)
                    wait = min(wait, left)
                gate.acquire(True, wait)
        finally:
            waiters.remove(gate)
        try:
            baton.pop()
            return
        except IndexError:  # a writer that did not wait took it first: wait again
            pass
        except BaseException:
            baton.append(True)
            raise


def wake_first(waiters: list[threading.Lock]) -> None:
    """Open the first waiter's gate (after the baton went back)."""
    try:
        waiters[0].release()
    except (IndexError, RuntimeError):  # nobody waits any more, or woken already
        pass
