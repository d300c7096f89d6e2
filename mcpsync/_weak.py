"""A Client nobody closed cleans up after itself, as ``subprocess.Popen`` does.

A Client's threads (a connection's reader, the pool's upkeep) must not keep it alive: the
parts they hold get the client's and its session's callbacks through :func:`weak_method`,
which does not keep the method's object alive. Once a Client is unreachable without its
``close()``, :func:`watch`'s finalizer says so with a :class:`ResourceWarning` and closes its
connections (servers end, pipes and sockets close) and stops its threads, on a thread of its
own: a finalizer runs inside whichever thread's garbage collection found the client, with
whatever locks that thread holds. ``close()`` detaches the finalizer; at interpreter exit it
does not run (the stdio transport ends its servers then anyway).
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable

__all__ = ["weak_method", "watch", "client_gone", "close_here"]


def weak_method(method: Callable[..., Any], fallback: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """``method`` (a bound method) as a callable that does not keep its object alive: once
    the object is gone it calls ``fallback`` with the same arguments, or does nothing."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        m = ref()
        if m is None:
            return None if fallback is None else fallback(*args)
        return m(*args)

    return call


def client_gone(*_args: Any) -> Any:
    """A gone client's pool factory: its connections are being closed."""
    from ._errors import PoolClosed

    raise PoolClosed("the client was collected without close()")


def close_here(close: Callable[[], None], _what: str) -> None:
    """A gone client's connection closer: close on this thread (its finalizer's)."""
    close()


def watch(client: object, name: str, pool: Any, worker: Any, openings: list[Any]) -> "weakref.finalize[Any, Any]":
    """Close ``pool``, ``worker`` and the connections being made (``openings``) once
    ``client`` is collected unclosed (none of them may hold the client)."""
    finalizer = weakref.finalize(client, _forgotten, name, pool, worker, openings)
    finalizer.atexit = False
    return finalizer


def _forgotten(name: str, pool: Any, worker: Any, openings: list[Any]) -> None:
    warnings.warn(
        f"an mcpsync Client ({name}) was never closed: its connections are closed now; call close(), or use the "
        "client in a with block", ResourceWarning, stacklevel=2,
    )
    try:
        threading.Thread(target=_close, args=(pool, worker, openings), name=f"mcpsync-unclosed-{name}", daemon=True).start()
    except RuntimeError:  # the interpreter is shutting down: no new threads
        _close(pool, worker, openings)


def _close(pool: Any, worker: Any, openings: list[Any]) -> None:
    for opening in list(openings):
        made = opening.made
        if made is not None and not opening.done.is_set():
            try:
                made.close()
            except Exception:  # pragma: no cover - best effort
                pass
    try:
        pool.close()
    finally:
        worker.close()
