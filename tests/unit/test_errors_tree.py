"""Every exception class of mcpsync lives in ``mcpsync._errors`` and is drawn in its
docstring tree, under its real parent (issue 17: one home, a tree a reader can trust).

The exceptions to "lives in _errors" are named here with their reason; they are still
drawn (or, for the auth subpackage, covered by its own module).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import mcpsync
from mcpsync import _errors

#: defined elsewhere on purpose (the _errors docstring says why)
ELSEWHERE = {
    # the framer and its compiled twin import nothing of the package
    "FrameTooLarge": ("mcpsync._speedups._pypipes", "mcpsync._speedups._cpipes"),
}
#: the OAuth subpackage keeps its own private errors (all under AuthError)
OWN_SUBPACKAGE = ("mcpsync.auth",)


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(mcpsync.__path__, "mcpsync."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (grpc, otel, ...) not installed
            continue
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("mcpsync"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def _drawn() -> dict[str, str]:
    """Class name → the parent it is drawn under ("" for a root), from the docstring's trees."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in (_errors.__doc__ or "").splitlines():
        m = re.match(r"^(\s*)((?:[│ ]   )*)(?:[├└]── )?([A-Z]\w+)\b", line)
        if m is None or not line.startswith("    "):
            continue
        depth = len(m.group(2)) // 4 + (1 if "── " in line else 0)
        name = m.group(3)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else ""  # a root: drawn, parent not drawn
        stack.append((depth, name))
    return parents


def test_every_exception_class_lives_in_errors() -> None:
    stray = sorted(
        path
        for path, cls in _exception_classes().items()
        if cls.__module__ != "mcpsync._errors"
        and cls.__module__ not in ELSEWHERE.get(cls.__qualname__, ())
        and not cls.__module__.startswith(OWN_SUBPACKAGE)
    )
    assert not stray, f"exception classes outside mcpsync/_errors.py: {stray}"


def test_every_exception_class_of_errors_is_drawn_under_its_parent() -> None:
    drawn = _drawn()
    for path, cls in _exception_classes().items():
        if cls.__module__.startswith(OWN_SUBPACKAGE) or cls.__qualname__ in ELSEWHERE:
            continue
        name = cls.__qualname__
        assert name in drawn, f"{path} is missing from the tree in mcpsync/_errors.py's docstring"
        assert drawn[name] in ("", cls.__bases__[0].__name__), f"{name} is drawn under {drawn[name]}, its parent is {cls.__bases__[0].__name__}"


def test_the_tree_reader_sees_nesting() -> None:
    drawn = _drawn()
    assert drawn["NetworkError"] == "MCPError"
    assert drawn["StartFailed"] == "ConnectError"
    assert drawn["ToolNotFound"] == "ToolError"
    assert drawn["ConfigError"] == "ValueError"
    assert drawn["MCPError"] == ""
