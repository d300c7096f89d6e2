# gnome-keyring's Secret Service: the real OS credential store the OAuth token store is tested on.
# Sourced by scripts/test.sh (under set -euo pipefail): installs the daemon if it is missing, then
# makes pytest run under dbus-run-session with an unlocked keyring (tests/setup/with-keyring.sh).
# Without it (no apt, no network) the keyring tests skip; nothing falls back to a plaintext file.
if ! command -v gnome-keyring-daemon >/dev/null || ! command -v dbus-run-session >/dev/null; then
    if command -v apt-get >/dev/null; then
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends gnome-keyring dbus libsecret-tools; } \
            || echo "tests/setup/30-keyring.sh: installing gnome-keyring failed" >&2
    fi
fi
if command -v gnome-keyring-daemon >/dev/null && command -v dbus-run-session >/dev/null; then
    # scripts/test.sh word-splits this: the path must not contain spaces.
    MCPSYNC_TEST_WRAPPER="${MCPSYNC_TEST_WRAPPER:+$MCPSYNC_TEST_WRAPPER }dbus-run-session -- bash $PWD/tests/setup/with-keyring.sh"
    export MCPSYNC_TEST_WRAPPER
else
    echo "tests/setup/30-keyring.sh: gnome-keyring unavailable; the keyring tests will be skipped" >&2
fi
