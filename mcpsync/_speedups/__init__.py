"""Selects the compiled or the pure-Python hot path.

``MCPSYNC_NO_EXTENSIONS=1`` forces pure Python; otherwise the Cython-compiled
``_cspeedups`` is used, and pure Python only when it cannot be imported.
``IMPLEMENTATION`` says which one is active: ``"c-extension"`` or ``"pure-python"``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import _pyspeedups

if TYPE_CHECKING or os.environ.get("MCPSYNC_NO_EXTENSIONS", "") not in ("", "0"):
    _impl = _pyspeedups
else:
    try:
        from . import _cspeedups as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - depends on the build
        _impl = _pyspeedups
    else:
        _stale = [name for name in _pyspeedups.__all__ if not hasattr(_impl, name)]
        if _stale:  # pragma: no cover - a build older than the source: rebuild it
            import warnings

            warnings.warn(
                f"mcpsync._speedups._cspeedups is older than its source (no {', '.join(_stale)}): using pure "
                "Python; rebuild with `python setup.py build_ext --inplace`",
                RuntimeWarning,
                stacklevel=2,
            )
            _impl = _pyspeedups

IMPLEMENTATION: str = "pure-python" if _impl is _pyspeedups else "c-extension"

LineFramer = _impl.LineFramer
write_line = _impl.write_line
FrameTooLarge = _impl.FrameTooLarge
TTLCache = _impl.TTLCache
DEFAULT_MAX_MESSAGE_SIZE: int = _impl.DEFAULT_MAX_MESSAGE_SIZE
Histogram = _impl.Histogram
CallTally = _impl.CallTally
bucket_index = _impl.bucket_index
fold_calls = _impl.fold_calls
CallQueue = _impl.CallQueue
BUCKETS: int = _impl.BUCKETS
Gate = _impl.Gate
FastPath = _impl.FastPath
EpollSwitch = _impl.EpollSwitch
IdleGate = _impl.IdleGate

__all__ = ["IMPLEMENTATION", "LineFramer", "write_line", "FrameTooLarge", "TTLCache", "DEFAULT_MAX_MESSAGE_SIZE", "Histogram",
           "CallTally", "bucket_index", "fold_calls", "CallQueue", "BUCKETS", "Gate", "FastPath", "EpollSwitch", "IdleGate"]
