#!/usr/bin/env bash
# The security features against a live private stack, as `make test` runs it after the Swift tests:
# the console's roles (scoped API keys, 403 naming the scope, the audit log), sessions Redis cannot
# forge (a value copied under an invented cookie, a made-up MAC), logins under a flood from one
# address (429s while the operator logs in from another), bounded state in push-ingest
# (max_activity_slots, new_tokens_per_minute), a legacy credential that survives a 429, slow request
# heads cut off, control characters refused, bundle ids that cannot be probed, and push-send
# reaching apns-sandbox through an authenticated HTTP CONNECT proxy without logging its password:
#
#   scripts/checks/security.sh [--bin-dir DIR]
#
# The executables of --bin-dir (default .build/debug) on 127.0.0.1: RabbitMQ 8600 (it also derives
# 9600, 28600 and 29600-29610), Redis 8601, apns-sandbox 8602 and its admin API 8603, push-ingest
# 8604, push-render and push-send's admin listeners 8605-8606, push-console 8608, and the check's own
# CONNECT proxy (Python, in the check's process) 8609; an apps file, an operators file (made with
# `pushctl console hash-password` and `hash-key`) and a session keys file (`openssl rand -hex 32`)
# of its own. See scripts/checks/security.py for every check and what it compares with (HTTP
# statuses, Redis read with redis-cli, apns-sandbox's /deliveries, the proxy's records, ss, logs).
#
# Installs what is missing first with apt (redis-tools, openssl, python3-pika, iproute2 for ss);
# RabbitMQ and Redis themselves come from scripts/install-deps.sh. Prints `PASS  …` or `FAIL  …: why`
# per check, `info  …` lines and `security: N passed, N failed`; exits 1 when a check failed, 2 on a
# usage error, 3 when a prerequisite is missing or the stack cannot be set up. Everything it started
# is stopped at the end, also on failure or Ctrl-C. Logs and the generated files: .local/security/.
# About 30 s (about 20 s of it starting the stack).
# Environment: PUSH_LOCAL_DIR (where the servers' directories and logs go, default .local).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=security.sh
BIN_DIR=$ROOT/.build/debug
while (($#)); do
    case $1 in
        --bin-dir) BIN_DIR=${2:?--bin-dir needs a directory}; shift 2 ;;
        --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
        -h | --help) sed -n '2,26s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "$PROG: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
# A relative --bin-dir is the caller's; from here on everything runs in the package root.
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd)
cd "$ROOT"

LOCAL="${PUSH_LOCAL_DIR:-$ROOT/.local}"
NAME=security
AMQP_PORT=8600
REDIS_PORT=8601

# --- prerequisites --------------------------------------------------------------------------

for product in apns-sandbox push-ingest push-render push-send push-console pushctl; do
    [[ -x $BIN_DIR/$product ]] || { echo "$PROG: $BIN_DIR/$product is missing (swift build first)" >&2; exit 3; }
done
if ! command -v redis-server >/dev/null || [[ ! -x ${PUSH_RABBITMQ_BIN_DIR:-/usr/lib/rabbitmq/bin}/rabbitmq-server ]]; then
    echo "$PROG: RabbitMQ or Redis is not installed (run scripts/install-deps.sh)" >&2
    exit 3
fi
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; exit 3; }

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
packages=()
command -v redis-cli >/dev/null || packages+=(redis-tools)
command -v openssl >/dev/null || packages+=(openssl)
command -v ss >/dev/null || packages+=(iproute2)
"$PY" -c 'import pika' 2>/dev/null || packages+=(python3-pika)
if ((${#packages[@]})); then
    apt_install "${packages[@]}" || true
    if ! command -v redis-cli >/dev/null || ! command -v openssl >/dev/null || ! command -v ss >/dev/null ||
        ! "$PY" -c 'import pika' 2>/dev/null; then
        echo "$PROG: cannot install ${packages[*]}" >&2
        exit 3
    fi
fi

# --- the run ----------------------------------------------------------------------------------

PIDS="$LOCAL/$NAME/pids"
# cleanup: whatever security.py started and did not stop (it stops everything itself; this is for
# a Python that was killed): its processes by PID, if they still run one of --bin-dir's
# executables, then the private RabbitMQ and Redis.
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local rc=$? pid exe bin
    trap '' INT TERM HUP
    trap - EXIT
    bin=$(cd "$BIN_DIR" 2>/dev/null && pwd -P || echo "$BIN_DIR")
    # shellcheck disable=SC2094 # read from, then removed
    if [[ -f $PIDS ]]; then
        while read -r pid; do
            [[ $pid =~ ^[0-9]+$ ]] || continue
            exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
            [[ -n $exe && $exe == "$bin"/* ]] || continue
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
            kill -KILL "$pid" 2>/dev/null || true
        done <"$PIDS"
        rm -f "$PIDS"
    fi
    PUSH_QUIET=1 bash scripts/rabbitmq.sh stop --name "$NAME" --port "$AMQP_PORT" >/dev/null 2>&1 || true
    PUSH_QUIET=1 bash scripts/redis.sh stop --name "$NAME" --port "$REDIS_PORT" >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

rc=0
# --foreground: Ctrl-C reaches the Python, which stops the stack itself; 300 s bounds a hung run.
timeout --foreground --signal=TERM --kill-after=30 300 "$PY" scripts/checks/security.py --bin-dir "$BIN_DIR" || rc=$?
exit "$rc"
