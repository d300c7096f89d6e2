"""Selects the compiled or the pure-Python JSON lane of the Streamable HTTP transport
(:mod:`._pyhttp`), as :mod:`mcpsync._speedups` selects its hot path: ``MCPSYNC_NO_EXTENSIONS=1``
forces pure Python; otherwise the Cython-compiled ``_chttp``, and pure Python only when it
cannot be imported. ``IMPLEMENTATION`` says which one is active.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import _pyhttp

if TYPE_CHECKING or os.environ.get("MCPSYNC_NO_EXTENSIONS", "") not in ("", "0"):
    _impl = _pyhttp
else:
    try:
        from . import _chttp as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - depends on the build
        _impl = _pyhttp
    else:
        _stale = [name for name in _pyhttp.__all__ if not hasattr(_impl, name)]
        if _stale:  # pragma: no cover - a build older than the source: rebuild it
            import warnings

            warnings.warn(
                f"mcpsync._speedups._chttp is older than its source (no {', '.join(_stale)}): using pure "
                "Python; rebuild with `python setup.py build_ext --inplace`",
                RuntimeWarning,
                stacklevel=2,
            )
            _impl = _pyhttp

IMPLEMENTATION: str = "pure-python" if _impl is _pyhttp else "c-extension"

JSONLane = _impl.JSONLane
simple_answer = _impl.simple_answer
facts_of = _impl.facts_of

__all__ = ["IMPLEMENTATION", "JSONLane", "simple_answer", "facts_of"]
