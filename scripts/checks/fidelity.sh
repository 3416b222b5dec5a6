#!/usr/bin/env bash
# apns-sandbox against clients nobody here wrote, as `make test` runs it after the Swift tests:
# aioapns (PyPI; it offers no ALPN, so it speaks HTTP/2 with prior knowledge), nghttp and h2load
# (Debian's nghttp2-client) against the --bin-dir apns-sandbox on 127.0.0.1:8840 (admin 8841).
# Valid notifications must answer 200 and invalid ones Apple's statuses and reasons, as each client
# reports them (token auth with a .p8 key the sandbox verifies, certificate auth with a client CA
# it trusts); h2load's 2,000 requests must all answer 2xx. See scripts/checks/fidelity.py for every
# case.
#
#   scripts/checks/fidelity.sh [--bin-dir DIR] [--port PORT] [--keep]
#
# Installs what is missing first: nghttp2-client with apt (apt-get update first, a retry once), and
# aioapns (with its h2, PyJWT and cryptography) from PyPI into the venv .local/fidelity-venv. Prints
# one line per check and `fidelity: N passed, N failed`; exits 1 when a check failed, 2 on a usage
# error, 3 when a prerequisite is missing or cannot be installed. The sandbox is stopped at the end,
# also on failure or Ctrl-C. A few seconds once installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
case " $* " in
    *" -h "* | *" --help "*)
        sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
        exit 0
        ;;
esac
PROG=fidelity.sh
VENV="$ROOT/.local/fidelity-venv"
# aioapns 3 and 4 share the API used here (APNs, NotificationRequest, the protocol classes).
AIOAPNS_REQUIREMENT='aioapns>=3,<5'

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

if ! command -v nghttp >/dev/null || ! command -v h2load >/dev/null; then
    apt_install nghttp2-client || { echo "$PROG: cannot install nghttp2-client" >&2; exit 3; }
fi
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || { echo "$PROG: cannot install python3-venv" >&2; exit 3; }
fi
if ! "$VENV/bin/python" -c 'import aioapns, jwt, cryptography' 2>/dev/null; then
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    pip=("$VENV/bin/pip" install --quiet --disable-pip-version-check --timeout 60)
    if ! "${pip[@]}" "$AIOAPNS_REQUIREMENT"; then
        echo "$PROG: pip failed; retrying once" >&2
        sleep 5
        "${pip[@]}" "$AIOAPNS_REQUIREMENT" || { echo "$PROG: cannot install $AIOAPNS_REQUIREMENT from PyPI" >&2; exit 3; }
    fi
fi
exec timeout --signal=TERM --kill-after=10 110 "$VENV/bin/python" scripts/checks/fidelity.py "$@"
