# The reference servers from npm, into .cache/npm: @modelcontextprotocol/server-everything, and the
# stateful registry servers (-memory keeps a knowledge graph, -sequential-thinking a thought
# history, both in their process) that the one-session-per-server tests talk to.
MCPSYNC_NPM_PREFIX="${MCPSYNC_NPM_PREFIX:-$PWD/.cache/npm}"
export MCPSYNC_NPM_PREFIX
_npm_version="2026.8.31"
_npm_missing=""
for _pkg in server-everything server-memory server-sequential-thinking; do
    if [ ! -f "$MCPSYNC_NPM_PREFIX/node_modules/@modelcontextprotocol/$_pkg/package.json" ]; then
        _npm_missing="$_npm_missing @modelcontextprotocol/$_pkg@${_npm_version}"
    fi
done
if [ -n "$_npm_missing" ]; then
    command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
    mkdir -p "$MCPSYNC_NPM_PREFIX"
    # shellcheck disable=SC2086
    npm install --prefix "$MCPSYNC_NPM_PREFIX" --no-audit --no-fund --silent $_npm_missing
fi
