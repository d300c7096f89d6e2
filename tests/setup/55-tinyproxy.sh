# A real HTTP forward proxy for the proxy tests (tests/integration/test_http_proxy.py):
# Debian's tinyproxy. The tests start it themselves, as the current user, with a config in a
# temporary directory, on 127.0.0.1 only, in the foreground; the package's own service is
# never started (no systemd here). Without apt or network the proxy tests are skipped.
if ! command -v tinyproxy >/dev/null && [ ! -x /usr/bin/tinyproxy ]; then
    if command -v apt-get >/dev/null; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tinyproxy; } \
            || echo "tests/setup/55-tinyproxy.sh: installing tinyproxy failed; the proxy tests will be skipped" >&2
    else
        echo "tests/setup/55-tinyproxy.sh: no apt-get; the proxy tests will be skipped" >&2
    fi
fi
