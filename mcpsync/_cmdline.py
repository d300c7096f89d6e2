"""What the command-line entry points share (``mcpsync`` and ``mcpsync bench``), kept apart so
that neither imports the other."""

from __future__ import annotations

from typing import Sequence

__all__ = ["split_command"]


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(own arguments, server command)``: everything after ``--`` is the command.

    Example:
        >>> split_command(["tools", "--json", "--", "python", "-m", "srv"])
        (['tools', '--json'], ['python', '-m', 'srv'])
    """
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []
