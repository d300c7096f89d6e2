# Real load balancers for the replica tests (tests/integration/test_balancers.py): nginx
# (Debian's nginx-light: proxy, upstream, map) and HAProxy. The tests start them
# themselves, as the current user, with configs in a temporary directory, on 127.0.0.1
# only, in the foreground; the packages' own services are never started (no systemd here).
# Without apt or network the balancer tests are skipped with the reason.
_bal_missing=""
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || _bal_missing="$_bal_missing nginx-light"
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || _bal_missing="$_bal_missing haproxy"
if [ -n "$_bal_missing" ]; then
    if command -v apt-get >/dev/null; then
        # shellcheck disable=SC2086
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $_bal_missing; } \
            || echo "tests/setup/50-balancers.sh: installing$_bal_missing failed; the balancer tests will be skipped" >&2
    else
        echo "tests/setup/50-balancers.sh: no apt-get; the balancer tests will be skipped" >&2
    fi
fi
unset _bal_missing
