#!/usr/bin/env bash
# Run "$@" with an unlocked gnome-keyring Secret Service on the current D-Bus session bus.
# Usage: dbus-run-session -- bash tests/setup/with-keyring.sh python3 -m pytest ...
# The keyring's files live in a throwaway XDG_DATA_HOME, removed on exit.
set -euo pipefail
if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
    echo "with-keyring.sh: no D-Bus session bus; run it under dbus-run-session" >&2
    exit 2
fi
_kr_home="$(mktemp -d "${TMPDIR:-/tmp}/mcpsync-keyring.XXXXXX")"
export XDG_DATA_HOME="$_kr_home/data" XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$_kr_home/run}"
mkdir -p "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR"
chmod 700 "$XDG_RUNTIME_DIR"
# A non-empty password, or the daemon prompts for one and fails.
_kr_pw="mcpsync-test-$$-$RANDOM"
printf %s "$_kr_pw" | gnome-keyring-daemon --unlock --components=secrets >/dev/null
unset _kr_pw
# The daemon forks before it owns the bus name: wait (bounded) for org.freedesktop.secrets.
_kr_ok=""
for _ in $(seq 1 100); do
    if dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true"; then
        _kr_ok=1
        break
    fi
    sleep 0.05
done
if [ -z "$_kr_ok" ]; then
    echo "with-keyring.sh: org.freedesktop.secrets never appeared on the bus" >&2
    exit 3
fi
# A missing bus must fail loudly, never fall back to a plaintext file.
export PYTHON_KEYRING_BACKEND=keyring.backends.SecretService.Keyring
export MCPSYNC_KEYRING_READY=1
trap 'rm -rf "$_kr_home"' EXIT
"$@"
