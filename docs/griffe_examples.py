"""A griffe extension for the API reference: mcpsync's docstrings head their doctests
``Example:`` (singular), which Google style reads as an admonition whose ``>>>`` lines
would be rendered as prose; this makes them the ``Examples:`` section, rendered as code."""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` headings to ``Examples:`` in every loaded docstring."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is not None and "Example:" in docstring.value:
            docstring.value = _HEADING.sub(r"\1Examples:", docstring.value)
