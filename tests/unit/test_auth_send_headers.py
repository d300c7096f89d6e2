"""auth_send_headers: a HeaderBlock merged with the auth hook's headers once per change of
what the hook gives (issue 35: a bearer hook cost 16-50 K instructions a request when the
headers were merged, checked and formatted again each time); checks stay as strict."""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync._errors import AuthError
from mcpsync.transports._http_headers import auth_send_headers
from mcpsync.transports._http_options import HeaderBlock

URL = "http://127.0.0.1:1/mcp"


class Hook:
    def __init__(self, token: str) -> None:
        self.token = token
        self.asked = 0

    def headers(self, url: str, method: str) -> dict[str, str]:
        self.asked += 1
        return {"Authorization": f"Bearer {self.token}"}  # a fresh dict every time


def test_the_same_token_reuses_the_merged_block() -> None:
    base = HeaderBlock({"Accept": "application/json"})
    hook = Hook("a")
    first = auth_send_headers(hook, base, URL, "POST")
    assert type(first) is HeaderBlock and dict(first) == {"Accept": "application/json", "Authorization": "Bearer a"}
    assert auth_send_headers(hook, base, URL, "POST") is first  # no merge, check or formatting again
    assert hook.asked == 2  # the hook is still asked every time


def test_a_new_token_is_sent_at_once() -> None:
    base = HeaderBlock({"Accept": "application/json"})
    hook = Hook("a")
    auth_send_headers(hook, base, URL, "POST")
    hook.token = "b"
    assert auth_send_headers(hook, base, URL, "POST")["Authorization"] == "Bearer b"


def test_another_hook_on_the_same_block_gets_its_own_headers() -> None:
    base = HeaderBlock({"Accept": "application/json"})
    one, two = Hook("same"), Hook("same")
    first = auth_send_headers(one, base, URL, "POST")
    assert auth_send_headers(two, base, URL, "POST") is not first
    assert auth_send_headers(two, base, URL, "POST")["Authorization"] == "Bearer same"


def test_a_token_that_cannot_go_on_the_wire_is_an_auth_error_even_after_a_good_one() -> None:
    base = HeaderBlock({"Accept": "application/json"})
    hook = Hook("a")
    auth_send_headers(hook, base, URL, "POST")
    hook.token = "a\r\nX-Injected: 1"
    with pytest.raises(AuthError, match="cannot be sent") as info:
        auth_send_headers(hook, base, URL, "POST")
    assert "X-Injected" not in str(info.value)  # the value is never quoted
    with pytest.raises(AuthError, match="cannot be sent"):
        auth_send_headers(hook, {"Accept": "application/json"}, URL, "POST")  # a plain dict too


def test_plain_headers_are_merged_each_time_and_never_changed() -> None:
    plain = {"Accept": "application/json", "Mcp-Param-Region": "north"}
    hook = Hook("a")
    sent = auth_send_headers(hook, plain, URL, "POST")
    assert sent == {**plain, "Authorization": "Bearer a"} and "Authorization" not in plain
    assert auth_send_headers(hook, plain, URL, "POST") is not sent


def test_a_failing_or_empty_hook() -> None:
    class Broken:
        def headers(self, url: str, method: str) -> Any:
            raise RuntimeError("no keyring")

    class Empty:
        def headers(self, url: str, method: str) -> Any:
            return None

    base = HeaderBlock({"Accept": "application/json"})
    with pytest.raises(AuthError, match="failed to provide headers"):
        auth_send_headers(Broken(), base, URL, "POST")
    assert dict(auth_send_headers(Empty(), base, URL, "POST")) == {"Accept": "application/json"}
