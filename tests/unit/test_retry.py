"""Call retries (RetryPolicy + retry_call) and the reconnection schedule, with fake sleeps."""

from __future__ import annotations

import pickle
import random
import threading
from dataclasses import replace

import pytest

from mcpsync._errors import NetworkError, RemoteError as RemoteErrorBase, StartFailed as StartFailedErr

from mcpsync._errors import (
    AuthError,
    Cancelled,
    CircuitOpen,
    ConnectError,
    ConnectionClosed,
    InvalidParams,
    MethodNotFound,
    PermissionDenied,
    PoolTimeout,
    ProtocolError,
    RequestTimeout,
    ServerUnavailable,
    ToolNotFound,
    error_from_code,
    may_have_reached_server,
)
from mcpsync._retry import ReconnectSchedule, retry_call
from mcpsync._policies import ReconnectPolicy, RetryPolicy


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def failing(*errors: BaseException, result: object = "ok"):
    """An attempt that raises ``errors`` in turn, then returns ``result``."""
    queue = list(errors)
    calls: list[int] = []

    def attempt() -> object:
        calls.append(1)
        if queue:
            raise queue.pop(0)
        return result

    attempt.calls = calls  # type: ignore[attr-defined]
    return attempt


MID = lambda: 0.5  # noqa: E731  (no jitter)


# --- the schedule -----------------------------------------------------------------------


def test_default_numbers() -> None:
    p = RetryPolicy.DEFAULT
    assert (p.retries, p.backoff, p.max_wait, p.jitter) == (5, 1.0, 30.0, 0.25)


def test_schedule_immediate_then_1_2_4_8() -> None:
    sleeps = Sleeps()
    attempt = failing(*(ConnectError("refused") for _ in range(5)))
    assert retry_call(attempt, sleep=sleeps, rand=MID) == "ok"
    assert len(attempt.calls) == 6
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]  # the first retry is immediate (no sleep)


def test_at_most_five_retries_then_the_last_error_with_history() -> None:
    sleeps = Sleeps()
    errors = [ConnectError(f"refused {i}") for i in range(10)]
    attempt = failing(*errors)
    with pytest.raises(ConnectError) as info:
        retry_call(attempt, sleep=sleeps, rand=MID)
    assert len(attempt.calls) == 6
    assert info.value is errors[5]
    assert info.value.retry_history == (
        ("ConnectError", 0.0),
        ("ConnectError", 0.0),
        ("ConnectError", 1.0),
        ("ConnectError", 2.0),
        ("ConnectError", 4.0),
        ("ConnectError", 8.0),
    )
    assert len(info.value.retry_history) == 6
    back = pickle.loads(pickle.dumps(info.value))
    assert back.retry_history == info.value.retry_history


def test_total_wait_is_capped() -> None:
    sleeps = Sleeps()
    policy = replace(RetryPolicy.DEFAULT, backoff=10.0, jitter=0.0)  # 0, 10, 20, 40, 80 uncapped
    with pytest.raises(ConnectError) as info:
        retry_call(failing(*(ConnectError("x") for _ in range(10))), policy, sleep=sleeps)
    assert sleeps.waits == [10.0, 20.0]  # 30 s spent: no further non-immediate retry
    assert sum(sleeps.waits) <= policy.max_wait
    assert len(info.value.retry_history) == 4


def test_last_wait_is_clipped_to_the_budget() -> None:
    sleeps = Sleeps()
    policy = replace(RetryPolicy.DEFAULT, backoff=10.0, jitter=0.0, max_wait=25.0)
    with pytest.raises(ConnectError):
        retry_call(failing(*(ConnectError("x") for _ in range(10))), policy, sleep=sleeps)
    assert sleeps.waits == [10.0, 15.0]


def test_fixed_interval_policy() -> None:
    sleeps = Sleeps()
    policy = RetryPolicy(retries=3, backoff=0.5, fixed=True, jitter=0.0)
    with pytest.raises(ConnectError):
        retry_call(failing(*(ConnectError("x") for _ in range(10))), policy, sleep=sleeps)
    assert sleeps.waits == [0.5, 0.5, 0.5]


def test_no_retries_policy() -> None:
    attempt = failing(ConnectError("x"))
    with pytest.raises(ConnectError) as info:
        retry_call(attempt, RetryPolicy.NONE, sleep=Sleeps())
    assert len(attempt.calls) == 1 and info.value.retry_history == (("ConnectError", 0.0),)


@pytest.mark.parametrize("retry_number", [2, 3, 4, 5])
def test_jitter_stays_within_25_percent(retry_number: int) -> None:
    policy = RetryPolicy.DEFAULT
    for _ in range(retry_number):
        policy = policy.increment(ConnectError("x"), 0.0)
    base = policy.base_delay(retry_number)
    rnd = random.Random(retry_number)
    samples = [0.0, 0.5, 0.999999] + [rnd.random() for _ in range(500)]
    waits = [policy.next_wait(lambda r=r: r) for r in samples]
    assert all(w is not None and 0.75 * base <= w <= 1.25 * base for w in waits)
    assert min(waits) < 0.8 * base and max(waits) > 1.2 * base  # the jitter is really used
    assert policy.next_wait() is not None  # the default random source works too


def test_jitter_extremes_and_immediate_first_retry() -> None:
    p = RetryPolicy.DEFAULT.increment(ConnectError("x"))
    assert p.next_wait(lambda: 0.0) == 0.0 and p.next_wait(lambda: 0.99) == 0.0  # immediate stays immediate
    p = p.increment(ConnectError("x"))
    assert p.next_wait(lambda: 0.0) == pytest.approx(0.75)
    assert p.next_wait(lambda: 1.0) == pytest.approx(1.25)


def test_policy_values_are_never_mutated() -> None:
    policy = RetryPolicy.DEFAULT
    with pytest.raises(ConnectError):
        retry_call(failing(*(ConnectError("x") for _ in range(10))), policy, sleep=Sleeps())
    assert policy.history == () and RetryPolicy.DEFAULT.history == ()
    later = policy.increment(ConnectError("x"))
    assert later is not policy and later.attempts == 1 and policy.attempts == 0
    assert later == policy  # history does not take part in equality


# --- what is retried ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc",
    [
        ToolNotFound("nope"),
        InvalidParams("bad"),
        AuthError("401"),
        PermissionDenied("403"),
        Cancelled("caller"),
        CircuitOpen("open", retry_after=30.0),
        ServerUnavailable("down"),
        MethodNotFound("nope", code=-32601),
        ProtocolError("garbage"),
        ValueError("a bug in the attempt"),
    ],
)
def test_never_retried(exc: BaseException) -> None:
    attempt = failing(exc)
    with pytest.raises(type(exc)):
        retry_call(attempt, safe_to_retry=True, sleep=Sleeps())
    assert len(attempt.calls) == 1


def test_never_retry_set_is_configurable() -> None:
    policy = replace(RetryPolicy.DEFAULT, never_retry=(*RetryPolicy.DEFAULT.never_retry, ConnectError))
    attempt = failing(ConnectError("x"))
    with pytest.raises(ConnectError):
        retry_call(attempt, policy, sleep=Sleeps())
    assert len(attempt.calls) == 1


@pytest.mark.parametrize("exc", [RequestTimeout("t"), ConnectionClosed("eof")])
def test_attempts_that_may_have_reached_the_server_need_a_safe_flag(exc: BaseException) -> None:
    unsafe = failing(exc)
    with pytest.raises(type(exc)) as info:
        retry_call(unsafe, safe_to_retry=False, sleep=Sleeps())
    assert len(unsafe.calls) == 1 and len(info.value.retry_history) == 1
    safe = failing(exc)
    assert retry_call(safe, safe_to_retry=True, sleep=Sleeps(), rand=MID) == "ok"
    assert len(safe.calls) == 2


@pytest.mark.parametrize(
    "exc", [ConnectError("refused"), PoolTimeout("busy"), ConnectionClosed("write failed", sent=False)]
)
def test_attempts_that_never_left_the_client_are_always_retried(exc: BaseException) -> None:
    attempt = failing(exc)
    assert retry_call(attempt, safe_to_retry=False, sleep=Sleeps(), rand=MID) == "ok"
    assert len(attempt.calls) == 2


def test_the_final_error_carries_the_errors_it_retried() -> None:
    """``retried_errors``: what each earlier attempt raised, so a caller can tell whether
    an unannotated call was re-sent (here: the first attempt never left the client)."""
    first, second = ConnectionClosed("dead before writing", sent=False), ConnectionClosed("eof")
    with pytest.raises(ConnectionClosed) as info:
        retry_call(failing(first, second), safe_to_retry=False, sleep=Sleeps(), rand=MID)
    assert info.value is second
    assert info.value.retried_errors == (first,)
    assert [name for name, _ in info.value.retry_history] == ["ConnectionClosed", "ConnectionClosed"]
    assert not any(may_have_reached_server(e) for e in info.value.retried_errors)
    back = pickle.loads(pickle.dumps(info.value))
    assert [str(e) for e in back.retried_errors] == ["dead before writing"]
    assert back.retried_errors[0].sent is False


def test_an_attempt_reraising_an_earlier_error_does_not_list_itself() -> None:
    same = ConnectError("refused")
    with pytest.raises(ConnectError) as info:
        retry_call(failing(same, same), RetryPolicy(retries=1, jitter=0.0), sleep=Sleeps())
    assert info.value.retried_errors == () and len(info.value.retry_history) == 2


def test_on_retry_sees_each_new_policy_value() -> None:
    seen: list[tuple[int, str, float]] = []
    retry_call(
        failing(ConnectError("a"), PoolTimeout("b")),
        sleep=Sleeps(),
        rand=MID,
        on_retry=lambda p, e, w: seen.append((p.attempts, type(e).__name__, w)),
    )
    assert seen == [(1, "ConnectError", 0.0), (2, "PoolTimeout", 1.0)]


def test_history_mixes_error_kinds_and_stops_on_a_permanent_one() -> None:
    with pytest.raises(InvalidParams) as info:
        retry_call(failing(RequestTimeout("t"), InvalidParams("bad")), safe_to_retry=True, sleep=Sleeps(), rand=MID)
    assert info.value.retry_history == (("RequestTimeout", 0.0), ("InvalidParams", 0.0))


# --- reconnection -------------------------------------------------------------------------


def test_reconnect_policy_schedule() -> None:
    p = ReconnectPolicy.DEFAULT
    assert p.schedule() == (0.0, 1.0, 2.0, 4.0, 8.0)
    assert [p.delay_after(n) for n in range(1, 8)] == [0.0, 1.0, 2.0, 4.0, 8.0, None, None]
    jittered = ReconnectPolicy(jitter=0.25)
    assert 0.75 <= jittered.delay_after(2, lambda: 0.0) <= 1.25
    with pytest.raises(ValueError):
        ReconnectPolicy(max_failures=0)


def test_sixth_failure_marks_unavailable_until_reset() -> None:
    marked: list[ServerUnavailable] = []
    schedule = ReconnectSchedule(name="srv", on_unavailable=marked.append)
    delays = [schedule.failure(ConnectError("refused")) for _ in range(6)]
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, None]
    assert schedule.unavailable and len(marked) == 1 and marked[0].failures == 6
    with pytest.raises(ServerUnavailable) as info:
        schedule.check()
    assert info.value.server == "srv"
    assert schedule.failure(ConnectError("again")) is None and len(marked) == 1  # told once
    schedule.reset()
    assert not schedule.unavailable and schedule.failures == 0
    schedule.check()
    assert schedule.failure() == 0.0


def test_success_restarts_the_count() -> None:
    schedule = ReconnectSchedule()
    for _ in range(4):
        schedule.failure()
    schedule.success()
    assert schedule.failures == 0 and schedule.failure() == 0.0


def test_run_rebuilds_on_schedule_after_a_lost_connection() -> None:
    sleeps = Sleeps()
    schedule = ReconnectSchedule()
    connect = failing(ConnectError("1"), ConnectError("2"), ConnectError("3"), result="conn")
    assert schedule.run(connect, lost=ConnectionClosed("EOF"), sleep=sleeps) == "conn"
    assert sleeps.waits == [1.0, 2.0, 4.0]  # attempt 1 immediate, then 1, 2, 4
    assert schedule.failures == 0


def test_run_gives_up_after_the_sixth_failure() -> None:
    sleeps = Sleeps()
    schedule = ReconnectSchedule()
    connect = failing(*(ConnectError(str(i)) for i in range(10)))
    with pytest.raises(ServerUnavailable) as info:
        schedule.run(connect, lost=ConnectionClosed("EOF"), sleep=sleeps)
    assert len(connect.calls) == 5  # the loss is failure 1; five rebuild attempts
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]
    assert isinstance(info.value.__cause__, ConnectError)
    with pytest.raises(ServerUnavailable):  # next calls are told at once
        schedule.run(connect, sleep=sleeps)
    assert len(connect.calls) == 5


def test_run_first_connect_gets_six_attempts() -> None:
    sleeps = Sleeps()
    schedule = ReconnectSchedule()
    connect = failing(*(ConnectError(str(i)) for i in range(10)))
    with pytest.raises(ServerUnavailable):
        schedule.run(connect, sleep=sleeps)
    assert len(connect.calls) == 6
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0]


def test_run_stops_at_once_on_auth_failure() -> None:
    schedule = ReconnectSchedule()
    connect = failing(AuthError("401"), result="conn")
    with pytest.raises(AuthError):
        schedule.run(connect, sleep=Sleeps())
    assert len(connect.calls) == 1 and not schedule.unavailable


def test_schedule_counts_are_thread_safe() -> None:
    schedule = ReconnectSchedule(ReconnectPolicy(max_failures=1000))
    threads = [threading.Thread(target=lambda: [schedule.failure() for _ in range(50)]) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert schedule.failures == 800


def test_concurrent_rebuilders_count_one_outage_once() -> None:
    schedule = ReconnectSchedule()
    attempts: list[int] = []
    lock = threading.Lock()

    def connect() -> str:
        with lock:
            attempts.append(1)
        raise ConnectError("refused")

    outcomes: list[str] = []

    def rebuild() -> None:
        try:
            schedule.run(connect, sleep=lambda s: None)
        except ServerUnavailable:
            outcomes.append("unavailable")

    threads = [threading.Thread(target=rebuild) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert outcomes == ["unavailable"] * 8
    assert len(attempts) == 6  # one schedule's worth of attempts, not eight


@pytest.mark.parametrize("code", [-32603, -32000, -32001])
def test_error_answers_are_never_retried(code: int) -> None:
    """An error answer proves the server alive; a retry would only repeat it."""
    attempt = failing(error_from_code(code, "handler raised"))
    with pytest.raises(RemoteErrorBase):
        retry_call(attempt, safe_to_retry=True, sleep=Sleeps())
    assert len(attempt.calls) == 1


def test_start_failures_are_never_retried() -> None:
    attempt = failing(StartFailedErr("no such command: nosuch", command="nosuch", exit_code=None, stderr_tail=""))
    with pytest.raises(StartFailedErr):
        retry_call(attempt, safe_to_retry=True, sleep=Sleeps())
    assert len(attempt.calls) == 1


def test_retry_after_lengthens_the_wait() -> None:
    """HTTP 429/503 ``Retry-After``: the next attempt waits at least that long."""
    sleeps = Sleeps()
    attempt = failing(NetworkError("HTTP 429", status=429, retry_after=3.0, sent=False))
    assert retry_call(attempt, sleep=sleeps, rand=MID) == "ok"
    assert sleeps.waits == [3.0]  # the schedule's first retry is immediate


def test_retry_after_past_the_budget_ends_the_call() -> None:
    sleeps = Sleeps()
    attempt = failing(NetworkError("HTTP 503", status=503, retry_after=60.0))
    with pytest.raises(NetworkError):
        retry_call(attempt, safe_to_retry=True, sleep=sleeps, give_up=lambda exc, wait: wait > 5.0)
    assert sleeps.waits == [] and len(attempt.calls) == 1


def test_a_lazy_safe_flag_is_asked_only_when_it_matters() -> None:
    asked: list[int] = []

    def safe() -> bool:
        asked.append(1)
        return True

    # never left the client: retried without asking
    assert retry_call(failing(ConnectError("refused")), safe_to_retry=safe, sleep=Sleeps()) == "ok"
    assert asked == []
    # may have reached the server: asked once, and its answer decides
    attempt = failing(RequestTimeout("t"), RequestTimeout("t"))
    assert retry_call(attempt, safe_to_retry=safe, sleep=Sleeps(), rand=MID) == "ok"
    assert asked == [1] and len(attempt.calls) == 3
    unsafe = failing(RequestTimeout("t"))
    with pytest.raises(RequestTimeout):
        retry_call(unsafe, safe_to_retry=lambda: False, sleep=Sleeps())
    assert len(unsafe.calls) == 1
