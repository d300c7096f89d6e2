"""The hot path, compiled (Cython) next to its pure-Python twin: newline framing."""

from __future__ import annotations

import pytest

from mcpsync._speedups import _cpipes, _pypipes

SMALL = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}\n' * 3
BIG = b'{"x":"' + b"y" * 64_000 + b'"}\n'
BIG_PARTS = [BIG[i : i + 4096] for i in range(0, len(BIG), 4096)]


@pytest.mark.benchmark(group="framing-3-messages-per-chunk")
@pytest.mark.parametrize("impl", [_cpipes, _pypipes], ids=["c-extension", "pure-python"])
def test_framing_small(benchmark, impl):
    f = impl.LineFramer()
    assert len(benchmark(f.feed, SMALL)) == 3


@pytest.mark.benchmark(group="framing-64KB-in-4KB-reads")
@pytest.mark.parametrize("impl", [_cpipes, _pypipes], ids=["c-extension", "pure-python"])
def test_framing_large_in_parts(benchmark, impl):
    f = impl.LineFramer()

    def feed_all():
        out = []
        for part in BIG_PARTS:
            out += f.feed(part)
        return out

    assert len(benchmark(feed_all)) == 1
