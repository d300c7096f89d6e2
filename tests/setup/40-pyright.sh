# pyright (PyPI package, from the test extra) fetches its node part on first use: do it
# here, once, so the type-check test does not download during the suite. Needs node (10-npm.sh).
if command -v pyright >/dev/null 2>&1; then
    pyright --version >/dev/null 2>&1 || echo "tests/setup/40-pyright.sh: pyright could not start; the pyright test will fail" >&2
fi
