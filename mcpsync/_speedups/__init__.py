"""Selects the compiled or the pure-Python hot path.

``MCPSYNC_NO_EXTENSIONS=1`` forces pure Python; otherwise the Cython-compiled ``_cspeedups``
(cache, tallies, the guard's fast path), ``_cpipes`` (the stdio pipe) and ``_chttp`` (the
Streamable HTTP transport's JSON lane) are used, all three or none: pure Python when any
cannot be imported. ``IMPLEMENTATION`` says which one is active: ``"c-extension"`` or
``"pure-python"``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import _pyhttp, _pypipes, _pyspeedups

if TYPE_CHECKING or os.environ.get("MCPSYNC_NO_EXTENSIONS", "") not in ("", "0"):
    _impl, _pipes, _http = _pyspeedups, _pypipes, _pyhttp
else:
    try:
        from . import _chttp as _http  # type: ignore[no-redef]
        from . import _cpipes as _pipes  # type: ignore[no-redef]
        from . import _cspeedups as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - depends on the build
        _impl, _pipes, _http = _pyspeedups, _pypipes, _pyhttp
    else:
        _stale = [name for source, built in ((_pyspeedups, _impl), (_pypipes, _pipes), (_pyhttp, _http))
                  for name in source.__all__ if not hasattr(built, name)]
        if _stale:  # pragma: no cover - a build older than the source: rebuild it
            import warnings

            warnings.warn(
                f"mcpsync._speedups' compiled modules are older than their source (no {', '.join(_stale)}): using "
                "pure Python; rebuild with `python setup.py build_ext --inplace`",
                RuntimeWarning,
                stacklevel=2,
            )
            _impl, _pipes, _http = _pyspeedups, _pypipes, _pyhttp

IMPLEMENTATION: str = "pure-python" if _impl is _pyspeedups else "c-extension"

LineFramer = _pipes.LineFramer
write_line = _pipes.write_line
FrameTooLarge = _pipes.FrameTooLarge
DEFAULT_MAX_MESSAGE_SIZE: int = _pipes.DEFAULT_MAX_MESSAGE_SIZE
EpollSwitch = _pipes.EpollSwitch
IdleGate = _pipes.IdleGate
PipeEnds = _pipes.PipeEnds
TTLCache = _impl.TTLCache
Histogram = _impl.Histogram
CallTally = _impl.CallTally
bucket_index = _impl.bucket_index
fold_calls = _impl.fold_calls
CallQueue = _impl.CallQueue
BUCKETS: int = _impl.BUCKETS
Gate = _impl.Gate
FastPath = _impl.FastPath
CallAnswer = _impl.CallAnswer
IdleReturn = _impl.IdleReturn
JSONLane = _http.JSONLane
simple_answer = _http.simple_answer
facts_of = _http.facts_of

__all__ = ["IMPLEMENTATION", "LineFramer", "write_line", "FrameTooLarge", "TTLCache", "DEFAULT_MAX_MESSAGE_SIZE", "Histogram",
           "CallTally", "bucket_index", "fold_calls", "CallQueue", "BUCKETS", "Gate", "FastPath", "EpollSwitch", "IdleGate",
           "CallAnswer", "PipeEnds", "IdleReturn", "JSONLane", "simple_answer", "facts_of"]
