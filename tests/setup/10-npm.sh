# @modelcontextprotocol/server-everything, the reference server, into .cache/npm.
MCPSYNC_NPM_PREFIX="${MCPSYNC_NPM_PREFIX:-$PWD/.cache/npm}"
export MCPSYNC_NPM_PREFIX
_everything_version="2026.8.31"
if [ ! -f "$MCPSYNC_NPM_PREFIX/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ]; then
    command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
    mkdir -p "$MCPSYNC_NPM_PREFIX"
    npm install --prefix "$MCPSYNC_NPM_PREFIX" --no-audit --no-fund --silent \
        "@modelcontextprotocol/server-everything@${_everything_version}"
fi
