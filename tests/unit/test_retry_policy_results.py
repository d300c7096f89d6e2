"""RetryPolicy's hook for transient results and its transient codes (pure logic)."""

from __future__ import annotations

import pytest

from mcpsync import RetryPolicy
from mcpsync import _errors as E
from mcpsync._breaker import BreakerState
from mcpsync._errors import RemoteError, TransientResult, error_from_code
from mcpsync._guard import Guard
from mcpsync._policies import BreakerPolicy
from mcpsync._retry import retry_call


def _attempts(*results: object):
    seen: list[object] = []
    it = iter(results)

    def fn() -> object:
        value = next(it)
        seen.append(value)
        if isinstance(value, BaseException):
            raise value
        return value

    return fn, seen


def test_a_result_judged_transient_is_retried_and_waits_what_it_asked() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retry_result=lambda r: 0.7 if r == "busy" else None, jitter=0)
    fn, seen = _attempts("busy", "busy", "ok")
    assert retry_call(fn, policy, safe_to_retry=True, sleep=waits.append) == "ok"
    assert seen == ["busy", "busy", "ok"] and waits == [0.7, 1.0]  # no sooner than asked; the schedule's 1 s


def test_true_retries_on_the_schedule_and_the_last_result_stands() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=2, retry_result=lambda r: r == "busy", jitter=0)
    fn, seen = _attempts("busy", "busy", "busy")
    assert retry_call(fn, policy, safe_to_retry=True, sleep=waits.append) == "busy"
    assert len(seen) == 3 and waits == [1.0]  # the first retry is immediate (no sleep)


def test_a_call_not_safe_to_repeat_keeps_its_first_result() -> None:
    fn, seen = _attempts("busy", "ok")
    assert retry_call(fn, RetryPolicy(retry_result=lambda r: True), sleep=lambda s: None) == "busy"
    assert seen == ["busy"]
    asked: list[bool] = []
    fn, seen = _attempts("busy", "ok")  # safety learned only when a result is judged transient
    assert retry_call(fn, RetryPolicy(retry_result=lambda r: r == "busy"),
                      safe_to_retry=lambda: asked.append(True) or True, sleep=lambda s: None) == "ok"
    assert asked == [True]


def test_a_hook_that_raises_keeps_the_result(caplog: pytest.LogCaptureFixture) -> None:
    def broken(result: object) -> bool:
        raise RuntimeError("bug in the hook")

    fn, seen = _attempts("r1", "r2")
    assert retry_call(fn, RetryPolicy(retry_result=broken), safe_to_retry=True, sleep=lambda s: None) == "r1"
    assert "retry_result raised" in caplog.text


def test_the_budget_ends_retries_with_the_last_result() -> None:
    guard = Guard("s", retry=RetryPolicy(retry_result=lambda r: 5.0), sleep=lambda s: None)
    assert guard.call(lambda: "busy", safe_to_retry=True, budget=1.0) == "busy"  # a 5 s wait would pass it


def test_transient_codes_are_a_policy_field() -> None:
    busy = error_from_code(-32000, "busy, try again")
    plain = RetryPolicy()
    assert not plain.is_transient(busy) and not plain.should_retry(busy, safe=True)
    policy = RetryPolicy(transient_codes=[-32000])  # any iterable, kept frozen
    assert policy.transient_codes == frozenset({-32000}) and policy.is_transient(busy)
    assert policy.should_retry(busy, safe=True) and not policy.should_retry(busy, safe=False)
    assert not policy.is_transient(error_from_code(-32603, "internal"))
    assert policy.is_transient(TransientResult("x", result=1, retry_after=None))


def test_the_deprecated_module_table_is_still_honoured() -> None:
    busy = error_from_code(-32001 - 1000, "busy")
    E.TRANSIENT_CODES.add(busy.code)
    try:
        assert RetryPolicy().is_transient(busy)
    finally:
        E.TRANSIENT_CODES.discard(busy.code)
    assert not RetryPolicy().is_transient(busy)


def test_the_breaker_counts_the_policys_transient_codes() -> None:
    def busy() -> object:
        raise error_from_code(-32000, "busy")

    counted = Guard("s", retry=RetryPolicy(retries=0, transient_codes={-32000}),
                    breaker=BreakerPolicy(threshold=2), sleep=lambda s: None)
    plain = Guard("s", retry=RetryPolicy(retries=0), breaker=BreakerPolicy(threshold=2), sleep=lambda s: None)
    for guard in (counted, plain):
        for _ in range(2):
            with pytest.raises(RemoteError):
                guard.call(busy, safe_to_retry=True)
    assert counted.breaker.state is BreakerState.OPEN and plain.breaker.state is BreakerState.CLOSED
