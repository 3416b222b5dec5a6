#!/usr/bin/env bash
# `make demo`: the whole path once, end to end, on a private stack beside any `make run`.
#
#   scripts/demo.sh
#
# Brings the stack up (scripts/run-local.sh as instance `demo`: RabbitMQ 127.0.0.1:5692, Redis
# 6399, apns-sandbox 2217/2218, services 18080/19101/19102/19103), registers a device with
# push-ingest's HTTP API (German locale, user demo-alice), publishes a push request that push-render
# localises server-side (loc-key GAME_PLAY_REQUEST_FORMAT with loc-args Jenna and Frank), waits
# for apns-sandbox to receive it from push-send, prints the payload it received, stops the stack and
# exits 0 (1 when the push did not arrive within PUSH_DEMO_TIMEOUT s, default 60; the stack's log is
# then printed). Environment: PUSH_BIN_DIR (as run-local.sh).
set -uo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"
PROG=demo

case ${1:-} in
    "") ;;
    -h | --help)
        sed -n '2,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "usage: scripts/demo.sh" >&2
        exit 2
        ;;
esac

cd "$PUSH_ROOT" || exit 1
BIN_DIR="${PUSH_BIN_DIR:-$PUSH_ROOT/.build/debug}"
TIMEOUT="${PUSH_DEMO_TIMEOUT:-60}"
INGEST=18080
SANDBOX_ADMIN=2218
LOG="$PUSH_LOCAL_DIR/demo.log"
APP=com.example.game
TOKEN=$(openssl rand -hex 32)
REQUEST_ID="demo-$(date +%s)-$RANDOM"

say() { printf 'demo | %s\n' "$*"; }

for tool in curl openssl; do
    command -v "$tool" >/dev/null || die "$tool is missing (make deps installs it)"
done
for exe in push-ingest push-render push-send push-feedback apns-sandbox pushctl; do
    [[ -x $BIN_DIR/$exe ]] || die "$BIN_DIR/$exe is not built (make demo builds it)"
done

STACK_PID=""
stop_stack() {
    [[ -n $STACK_PID ]] || return 0
    if alive "$STACK_PID"; then
        say "stopping the stack"
        kill -TERM "$STACK_PID" 2>/dev/null
        for _ in $(seq 1 600); do
            alive "$STACK_PID" || break
            sleep 0.1
        done
    fi
    wait "$STACK_PID" 2>/dev/null
    STACK_PID=""
}
trap stop_stack EXIT
trap 'stop_stack; exit 130' INT
trap 'stop_stack; exit 143' TERM

say "starting the stack (log: $LOG)"
PUSH_RUN_NAME=demo PUSH_RUN_CONSOLE=0 PUSH_RUN_AMQP_PORT=5692 PUSH_RUN_REDIS_PORT=6399 PUSH_RUN_SANDBOX_PORT=2217 \
    PUSH_RUN_SANDBOX_ADMIN_PORT=$SANDBOX_ADMIN PUSH_RUN_HTTP_PORTS="$INGEST 19101 19102 19103" \
    PUSH_BIN_DIR="$BIN_DIR" bash "$SCRIPTS/run-local.sh" >"$LOG" 2>&1 &
STACK_PID=$!

fail() {
    say "FAILED: $*"
    say "---- stack log ----"
    tail -n 80 "$LOG"
    exit 1
}

ready() {
    local port deadline=$(($(now_ms) + 120000))
    for port in "$INGEST" 19101 19102 19103; do
        until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do
            alive "$STACK_PID" || fail "the stack stopped while starting"
            (($(now_ms) < deadline)) || fail "the service on port $port was not ready within 120 s"
            sleep 0.3
        done
    done
}
ready
say "stack ready"

say "registering device ${TOKEN:0:8}… for user demo-alice (locale de) with push-ingest"
registration=$(curl -sS -X PUT "http://127.0.0.1:$INGEST/v1/apps/$APP/devices/$TOKEN" \
    -H 'Authorization: Bearer dev-ingest-key' -H 'Content-Type: application/json' \
    -d '{"user": "demo-alice", "locale": "de", "environment": "sandbox", "settings": {"alert": true, "badge": true, "sound": true}}' \
    -w '\n%{http_code}') || fail "push-ingest did not answer"
[[ ${registration##*$'\n'} == 201 || ${registration##*$'\n'} == 200 ]] || fail "registration answered: $registration"
say "registered: ${registration%$'\n'*}"

say "publishing push request $REQUEST_ID (server-side localisation)"
PUSH_AMQP_URL="amqp://guest:guest@127.0.0.1:5692/%2f" "$BIN_DIR/pushctl" publish - <<JSON || fail "publishing failed"
{
  "id": "$REQUEST_ID",
  "app": "$APP",
  "to": {"users": ["demo-alice"]},
  "localize": "server",
  "payload": {
    "aps": {
      "alert": {"loc-key": "GAME_PLAY_REQUEST_FORMAT", "loc-args": ["Jenna", "Frank"]},
      "badge": 1,
      "sound": "default"
    },
    "game_id": 4711
  }
}
JSON

say "waiting for apns-sandbox to receive it"
deadline=$(($(now_ms) + TIMEOUT * 1000))
while :; do
    deliveries=$(curl -fsS "http://127.0.0.1:$SANDBOX_ADMIN/deliveries?token=$TOKEN" 2>/dev/null || true)
    [[ $deliveries == *'"payload"'* ]] && break
    alive "$STACK_PID" || fail "the stack stopped before the push arrived"
    (($(now_ms) < deadline)) || fail "apns-sandbox received nothing for ${TOKEN:0:8}… within $TIMEOUT s"
    sleep 0.3
done
say "apns-sandbox received:"
printf '%s\n' "$deliveries" | python3 -m json.tool 2>/dev/null || printf '%s\n' "$deliveries"
stop_stack
say "done"
