#!/usr/bin/env bash
# Runs a command with the shared test servers up and always stops them afterwards (also when the
# command fails or on Ctrl-C / SIGTERM / SIGHUP); exits with the command's status.
#
#   scripts/with-test-servers.sh CMD [ARGS...]
#
# CMD sees PUSH_TEST_AMQP_URL, PUSH_TEST_AMQPS_URL, PUSH_TEST_TLS_DIR and PUSH_TEST_REDIS_URL (see scripts/test-servers.sh).
set -uo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

if (($# == 0)); then
    sed -n '2,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
fi

# shellcheck disable=SC2317 # invoked by the EXIT trap
on_exit() {
    local rc=$? out
    # Finish the clean-up even if Ctrl-C is pressed again; every step in it is bounded.
    trap '' INT TERM HUP
    trap - EXIT
    if ! out=$(bash "$SCRIPTS/test-servers.sh" stop 2>&1); then
        printf '%s\n' "$out" >&2
        warn "could not stop the test servers"
        ((rc == 0)) && rc=1
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

bash "$SCRIPTS/test-servers.sh" start || exit 1
eval "$(bash "$SCRIPTS/test-servers.sh" env)"

# In the foreground, so Ctrl-C reaches the command (and its children) directly.
"$@"
exit $?
