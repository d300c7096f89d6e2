# FastMCP's SEP-2663 tasks server (fastmcp-tasks, a real implementation of the tasks extension)
# in an environment of its own: fastmcp-tasks 4.1.4 pins fastmcp 4.1.4, while the test extra has
# fastmcp 4.2.3 (whose own tasks package, fastmcp-tasks 4.2.3, is not published). Sourced by
# scripts/test.sh (under set -euo pipefail). Idempotent: the environment is made once.
# Exports MCPSYNC_FASTMCP_TASKS_PYTHON for tests/integration/test_tasks_fastmcp.py (without it
# those tests skip, saying why).
_fmt_root="${MCPSYNC_FASTMCP_TASKS_PREFIX:-$PWD/.cache/fastmcp-tasks}"
_fmt_python="$_fmt_root/bin/python"
if [ ! -x "$_fmt_python" ] || ! "$_fmt_python" -c "import fastmcp_tasks" >/dev/null 2>&1; then
    { python3 -m venv "$_fmt_root" \
        && "$_fmt_python" -m pip install -q --disable-pip-version-check "fastmcp==4.1.4" "fastmcp-tasks==4.1.4"; } \
        || echo "tests/setup/70-fastmcp-tasks.sh: installing fastmcp-tasks failed" >&2
fi
if "$_fmt_python" -c "import fastmcp_tasks" >/dev/null 2>&1; then
    export MCPSYNC_FASTMCP_TASKS_PYTHON="$_fmt_python"
fi
unset _fmt_root _fmt_python
