#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, then runs pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q -e '.[test]'
# Each numbered file installs one real peer the tests use (npm servers, a keyring
# daemon, ...) and may set MCPSYNC_TEST_WRAPPER to a command that pytest must run under.
MCPSYNC_TEST_WRAPPER=""
for setup in tests/setup/[0-9][0-9]-*.sh; do
    # shellcheck source=/dev/null
    source "$setup"
done
# shellcheck disable=SC2086
exec $MCPSYNC_TEST_WRAPPER python3 -m pytest "$@"
