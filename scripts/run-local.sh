#!/usr/bin/env bash
# `make run`: the whole stack on loopback, in the foreground.
#
#   scripts/run-local.sh
#
# Starts RabbitMQ `dev` (127.0.0.1:5672) and Redis `dev` (127.0.0.1:6379) with scripts/rabbitmq.sh
# and scripts/redis.sh (data kept between runs), then each service executable that was built:
#   apns-sandbox   --port 2197 --admin-port 2198 --ca-out <local dir>/apns-sandbox-ca.pem
#   push-ingest    PUSH_HTTP_PORT=8080     push-render  PUSH_HTTP_PORT=9101
#   push-send      PUSH_HTTP_PORT=9102     push-feedback PUSH_HTTP_PORT=9103
#   push-console   PUSH_HTTP_PORT=8090, with a local operator `admin` whose random password is kept
#                  in <local dir>/console-password-<instance> (made once; PUSH_RUN_CONSOLE=0: no console)
# with PUSH_AMQP_URL, PUSH_REDIS_URL and (when apns-sandbox runs) PUSH_APNS_ENDPOINT and
# PUSH_APNS_CA_FILE set; every output line is prefixed with the service's name.
# Ctrl-C, SIGTERM or SIGHUP, or any service exiting, stops everything: SIGTERM to the four
# services (SIGKILL after PUSH_RUN_STOP_TIMEOUT s, default 20), then apns-sandbox, then RabbitMQ and
# Redis. With PUSH_RUN_KEEP_GOING=1 a service that exits is reported and the others keep running.
# Environment: PUSH_BIN_DIR (default <package root>/.build/debug), PUSH_LOCAL_DIR, and any PUSH_*
# setting the services read (PUSH_LOG_LEVEL, PUSH_APPS_FILE, ...). A second stack beside the first
# (make demo): PUSH_RUN_NAME (instance name, dev), PUSH_RUN_AMQP_PORT, PUSH_RUN_REDIS_PORT,
# PUSH_RUN_SANDBOX_PORT, PUSH_RUN_SANDBOX_ADMIN_PORT, PUSH_RUN_HTTP_PORTS ("8080 9101 9102 9103"),
# PUSH_RUN_CONSOLE_PORT (8090).
set -uo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"
PROG=run-local

case ${1:-} in
    "") ;;
    -h | --help)
        sed -n '2,24s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
        exit 0
        ;;
    *)
        echo "usage: scripts/run-local.sh" >&2
        exit 2
        ;;
esac

cd "$PUSH_ROOT" || exit 1
BIN_DIR="${PUSH_BIN_DIR:-$PUSH_ROOT/.build/debug}"
INSTANCE="${PUSH_RUN_NAME:-dev}"
AMQP_PORT="${PUSH_RUN_AMQP_PORT:-5672}"
REDIS_PORT="${PUSH_RUN_REDIS_PORT:-6379}"
SANDBOX_PORT="${PUSH_RUN_SANDBOX_PORT:-2197}"
SANDBOX_ADMIN_PORT="${PUSH_RUN_SANDBOX_ADMIN_PORT:-2198}"
read -r -a SERVICE_PORTS <<<"${PUSH_RUN_HTTP_PORTS:-8080 9101 9102 9103}"
CA_FILE="$PUSH_LOCAL_DIR/apns-sandbox-ca-$INSTANCE.pem"
STOP_TIMEOUT="${PUSH_RUN_STOP_TIMEOUT:-20}"
CONSOLE_PORT="${PUSH_RUN_CONSOLE_PORT:-8090}"

log() { printf '%-13s | %s\n' "$PROG" "$*"; }

SERVICE_PIDS=() # the four services
SANDBOX_PID=""
declare -A NAME_OF=()
servers_started=""
stopping=""

# prefix NAME: copies stdin to stdout with "NAME | " in front of every line. It ignores the
# terminal's signals so it keeps forwarding while its service shuts down, and ends at EOF.
prefix() {
    trap '' INT TERM HUP
    exec sed -u "s/^/$(printf '%-13s' "$1") | /"
}

# launch NAME CMD...: starts CMD in its own session (so Ctrl-C in the terminal reaches only this
# script, which then stops the services in order), output prefixed; sets LAUNCHED_PID.
launch() {
    local name=$1
    shift
    setsid "$@" </dev/null > >(prefix "$name") 2>&1 &
    LAUNCHED_PID=$!
    NAME_OF[$LAUNCHED_PID]=$name
    log "started $name (pid $LAUNCHED_PID)"
}

# stop_pids PID...: SIGTERM, wait up to STOP_TIMEOUT s, SIGKILL what is left, reap.
stop_pids() {
    local pid live=()
    for pid in "$@"; do alive "$pid" && live+=("$pid"); done
    ((${#live[@]})) || return 0
    for pid in "${live[@]}"; do
        log "stopping ${NAME_OF[$pid]} (pid $pid)"
        kill -TERM "$pid" 2>/dev/null
    done
    if ! wait_gone "$STOP_TIMEOUT" "${live[@]}"; then
        for pid in "${live[@]}"; do
            if alive "$pid"; then
                log "${NAME_OF[$pid]} did not stop within ${STOP_TIMEOUT}s; killing it"
                # (disowned first, or bash reports the job as "Killed" with a confusing line number)
                disown "$pid" 2>/dev/null
                kill -KILL "$pid" 2>/dev/null
            fi
        done
        wait_gone 5 "${live[@]}"
    fi
    for pid in "${live[@]}"; do wait "$pid" 2>/dev/null; done
    return 0
}

cleanup() {
    [[ -n $stopping ]] && return 0
    stopping=1
    trap '' INT TERM HUP
    ((${#SERVICE_PIDS[@]})) && stop_pids "${SERVICE_PIDS[@]}"
    [[ -n $SANDBOX_PID ]] && stop_pids "$SANDBOX_PID"
    if [[ -n $servers_started ]]; then
        bash "$SCRIPTS/rabbitmq.sh" stop --name "$INSTANCE" 2>&1 | sed -u "s/^/$(printf '%-13s' rabbitmq) | /"
        bash "$SCRIPTS/redis.sh" stop --name "$INSTANCE" 2>&1 | sed -u "s/^/$(printf '%-13s' redis) | /"
    fi
    log "everything stopped"
}

on_signal() {
    log "caught SIG$1; stopping everything"
    cleanup
    exit "$2"
}
# When the terminal's reader goes away (`make run | tee log` and Ctrl-C), writing a log line must
# not kill this script before it has stopped everything.
trap '' PIPE
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
trap cleanup EXIT

# --- which services exist -------------------------------------------------------------------
SERVICES=(push-ingest push-render push-send push-feedback)
[[ ${PUSH_RUN_CONSOLE:-1} == 0 ]] || SERVICES+=(push-console)
declare -A HTTP_PORT=([push-ingest]=${SERVICE_PORTS[0]} [push-render]=${SERVICE_PORTS[1]} [push-send]=${SERVICE_PORTS[2]} [push-feedback]=${SERVICE_PORTS[3]}
    [push-console]=$CONSOLE_PORT)
present=()
for s in apns-sandbox "${SERVICES[@]}"; do
    [[ -x $BIN_DIR/$s ]] && present+=("$s")
done
if ((${#present[@]} == 0)); then
    log "no service executable in $BIN_DIR; run 'swift build' (or 'make run') first"
    exit 1
fi
log "services found in $BIN_DIR: ${present[*]}"

# --- RabbitMQ and Redis ---------------------------------------------------------------------
servers_started=1
bash "$SCRIPTS/redis.sh" start --name "$INSTANCE" --port "$REDIS_PORT" || exit 1
bash "$SCRIPTS/rabbitmq.sh" start --name "$INSTANCE" --port "$AMQP_PORT" || exit 1

export PUSH_AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"
export PUSH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"

# --- the development signing key the default apps file names (never committed) -------------
DEV_KEY="$PUSH_ROOT/config/keys/AuthKey_DEVKEY0001.p8"
if [[ ${PUSH_APPS_FILE:-config/apps.json} == config/apps.json && ! -s $DEV_KEY ]]; then
    mkdir -p "$(dirname "$DEV_KEY")"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DEV_KEY" 2>/dev/null || exit 1
    log "made the development signing key $DEV_KEY"
fi
# The legacy /register form's HMAC secret the default apps file names (ingest.secret_file).
INGEST_SECRET="$PUSH_ROOT/config/keys/ingest-secret"
if [[ ${PUSH_APPS_FILE:-config/apps.json} == config/apps.json && ! -s $INGEST_SECRET ]]; then
    mkdir -p "$(dirname "$INGEST_SECRET")"
    (umask 077 && openssl rand -hex 32 >"$INGEST_SECRET") || exit 1
    log "made the legacy registration secret $INGEST_SECRET (hmac-sha256; give it to the apps that sign /register)"
fi
SANDBOX_KEYS=()
if [[ -s $DEV_KEY ]]; then
    # apns-sandbox verifies the development key's tokens as APNs would.
    openssl pkey -in "$DEV_KEY" -pubout -out "$PUSH_LOCAL_DIR/AuthKey_DEVKEY0001.pub.pem" 2>/dev/null \
        && SANDBOX_KEYS=(--public-key "DEVKEY0001=$PUSH_LOCAL_DIR/AuthKey_DEVKEY0001.pub.pem")
fi

# --- apns-sandbox first: the services trust the CA it writes ---------------------------------
if [[ -x $BIN_DIR/apns-sandbox ]]; then
    rm -f "$CA_FILE"
    launch apns-sandbox "$BIN_DIR/apns-sandbox" --port "$SANDBOX_PORT" --admin-port "$SANDBOX_ADMIN_PORT" \
        --ca-out "$CA_FILE" "${SANDBOX_KEYS[@]}"
    SANDBOX_PID=$LAUNCHED_PID
    deadline=$(($(now_ms) + 30000))
    while [[ ! -s $CA_FILE ]]; do
        if ! alive "$SANDBOX_PID"; then
            st=0
            wait "$SANDBOX_PID" || st=$?
            SANDBOX_PID=""
            log "apns-sandbox exited with status $st before writing $CA_FILE"
            [[ ${PUSH_RUN_KEEP_GOING:-} == 1 ]] && break
            exit 1
        fi
        if (($(now_ms) >= deadline)); then
            log "warning: apns-sandbox has not written $CA_FILE after 30 s; starting the services anyway"
            break
        fi
        sleep 0.1
    done
    if [[ -n $SANDBOX_PID ]]; then
        export PUSH_APNS_ENDPOINT="https://127.0.0.1:$SANDBOX_PORT"
        export PUSH_APNS_CA_FILE="$CA_FILE"
    fi
else
    log "apns-sandbox was not built; the services use the APNs endpoints of the apps file"
fi

# --- the console's local operator: `admin` with a random password, made once, kept under .local ----
CONSOLE_ENV=()
CONSOLE_PASSWORD_FILE="$PUSH_LOCAL_DIR/console-password-$INSTANCE"
if [[ " ${SERVICES[*]} " == *" push-console "* && -x $BIN_DIR/push-console && -x $BIN_DIR/pushctl ]]; then
    operators="${PUSH_CONSOLE_OPERATORS_FILE:-$PUSH_LOCAL_DIR/console-operators-$INSTANCE.json}"
    if [[ -z ${PUSH_CONSOLE_OPERATORS_FILE:-} && ! ( -s $operators && -s $CONSOLE_PASSWORD_FILE ) ]]; then
        password=$(openssl rand -hex 12) || exit 1
        hash=$(printf '%s\n' "$password" | "$BIN_DIR/pushctl" console hash-password) || exit 1
        (umask 077 && printf '%s\n' "$password" >"$CONSOLE_PASSWORD_FILE" \
            && printf '{"operators": [{"name": "admin", "password": "%s", "scopes": ["admin"]}]}\n' "$hash" >"$operators") || exit 1
        unset password hash
        log "made the console's local operator admin (password in $CONSOLE_PASSWORD_FILE)"
    fi
    # The key that signs console sessions (Redis holds only signed values), made once.
    session_keys="$PUSH_LOCAL_DIR/console-session-keys"
    if [[ ! -s $session_keys ]]; then
        (umask 077 && openssl rand -hex 32 >"$session_keys") || exit 1
    fi
    # Loopback only: the console is for the operators of this machine.
    CONSOLE_ENV=(PUSH_CONSOLE_OPERATORS_FILE="$operators" PUSH_CONSOLE_SESSION_KEYS_FILE="$session_keys" PUSH_HTTP_HOST=127.0.0.1)
fi

# Copy-paste next steps for a newcomer: register a device, send it a push three ways, watch it.
print_next_steps() {
    local ingest="http://127.0.0.1:${HTTP_PORT[push-ingest]}" admin="http://127.0.0.1:$SANDBOX_ADMIN_PORT"
    local amqp="amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f" pushctl="$BIN_DIR/pushctl"
    local token=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    # Unprefixed, so each command can be copied as it stands.
    cat <<NEXT

Try it (in another terminal):
1. Register a device for user alice:
   curl --fail-with-body -sS -X PUT $ingest/v1/apps/com.example.game/devices/$token \\
     -H 'Authorization: Bearer dev-ingest-key' -H 'Content-Type: application/json' \\
     -d '{"user":"alice","locale":"en-US","environment":"sandbox","topics":["news"]}'
2. Send alice a push with pushctl:
   echo '{"id":"hello-1","app":"com.example.game","to":{"users":["alice"]},"payload":{"aps":{"alert":"Hello"}}}' \\
     | PUSH_AMQP_URL='$amqp' $pushctl publish -
   or from Python (pip install pika):
     import json, pika
     connection = pika.BlockingConnection(pika.URLParameters("$amqp"))
     channel = connection.channel(); channel.confirm_delivery()
     channel.basic_publish("push", "request", json.dumps({"id": "hello-2", "app": "com.example.game", "to": {"users": ["alice"]}, "payload": {"aps": {"alert": "Hello from Python"}}}), pika.BasicProperties(delivery_mode=2, content_type="application/json"))
     connection.close()
3. Watch:
   curl --fail-with-body -sS '$admin/deliveries?token=$token'        # what apns-sandbox received
   curl -s http://127.0.0.1:${HTTP_PORT[push-send]}/metrics | grep push_send_delivered   # push-send's metrics (push-render ${HTTP_PORT[push-render]}, push-feedback ${HTTP_PORT[push-feedback]}, push-ingest ${HTTP_PORT[push-ingest]})
   PUSH_AMQP_URL='$amqp' $pushctl queues           # queue depths
   PUSH_APPS_FILE=config/apps.json $pushctl apps check   # the apps file and its credentials
   $pushctl request hello-1 --app com.example.game       # the push's delivery report
NEXT
    if ((${#CONSOLE_ENV[@]})); then
        cat <<NEXT
4. The console: http://127.0.0.1:${HTTP_PORT[push-console]}  (user admin; password: cat $CONSOLE_PASSWORD_FILE)
NEXT
    fi
    echo
}

# --- the services ------------------------------------------------------------------------
for s in "${SERVICES[@]}"; do
    [[ -x $BIN_DIR/$s ]] || continue
    if [[ $s == push-console ]]; then
        ((${#CONSOLE_ENV[@]})) || continue
        launch "$s" env PUSH_HTTP_PORT="${HTTP_PORT[$s]}" "${CONSOLE_ENV[@]}" "$BIN_DIR/$s"
    else
        launch "$s" env PUSH_HTTP_PORT="${HTTP_PORT[$s]}" "$BIN_DIR/$s"
    fi
    SERVICE_PIDS+=("$LAUNCHED_PID")
done
log "running; press Ctrl-C to stop everything"
print_next_steps


# --- wait: the first service to exit stops the stack (unless PUSH_RUN_KEEP_GOING=1) -----------
while :; do
    all=("${SERVICE_PIDS[@]}")
    [[ -n $SANDBOX_PID ]] && all+=("$SANDBOX_PID")
    if ((${#all[@]} == 0)); then
        log "no service is running any more"
        exit 1
    fi
    exited=""
    wait -n -p exited "${all[@]}"
    st=$?
    # A trapped signal interrupts wait; its handler stops everything and exits.
    [[ -n $exited ]] || continue
    log "${NAME_OF[$exited]} exited with status $st"
    if [[ ${PUSH_RUN_KEEP_GOING:-} != 1 ]]; then
        log "stopping everything"
        exit $((st == 0 ? 1 : st))
    fi
    if [[ $exited == "$SANDBOX_PID" ]]; then
        SANDBOX_PID=""
    else
        rest=()
        for p in "${SERVICE_PIDS[@]}"; do [[ $p == "$exited" ]] || rest+=("$p"); done
        SERVICE_PIDS=("${rest[@]}")
    fi
done
