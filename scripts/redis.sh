#!/usr/bin/env bash
# A local Redis on 127.0.0.1, one instance per name, for development and tests.
#
#   scripts/redis.sh start|stop|restart|status|kill [--name NAME] [--port PORT]
#                    [--cluster-node-timeout MS]
#
# Instance directory: ${PUSH_LOCAL_DIR:-<package root>/.local}/redis-NAME/
#   data/ (AOF, appendfsync everysec, no RDB snapshots), redis.log, redis.pid, port
# Defaults: --name dev, --port 6379. `start` is idempotent and returns once Redis answers PING;
# `stop` sends SIGTERM to the PID (Redis flushes the AOF) and waits until it has exited;
# `restart` keeps the data. `status` exits 0 when running, 3 when stopped. `kill` SIGKILLs it, as a
# crash would (the AOF keeps what was fsynced).
# --cluster-node-timeout MS (start): a Redis Cluster node (cluster-enabled, nodes.conf in data/, bus
#   port PORT+10000, failover after MS without an answer); remembered for later starts.
#   scripts/redis-cluster.sh makes a cluster of such nodes.
# Environment: PUSH_LOCAL_DIR, PUSH_REDIS_START_TIMEOUT (s, default 10; longer while loading data),
# PUSH_QUIET=1 (no progress lines, only errors).
set -euo pipefail

usage() {
    sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODE_TIMEOUT=""
args=()
while (($#)); do
    case $1 in
        --cluster-node-timeout) NODE_TIMEOUT=${2:?--cluster-node-timeout needs milliseconds}; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
EXTRA_VERBS="kill" parse_instance_args 6379 "${args[@]}"
[[ -z $NODE_TIMEOUT || $NODE_TIMEOUT =~ ^[1-9][0-9]{2,5}$ ]] || die "invalid --cluster-node-timeout '$NODE_TIMEOUT' (100-999999 ms)"
((PORT + 10000 <= 65535)) || [[ -z $NODE_TIMEOUT ]] || die "--port $PORT is too high for a cluster node (its bus port is PORT+10000)"

DIR="$PUSH_LOCAL_DIR/redis-$NAME"
PIDFILE="$DIR/redis.pid"
LOG="$DIR/redis.log"
LABEL="redis $NAME"

info() { [[ ${PUSH_QUIET:-} == 1 ]] || say "$LABEL: $*"; }

command -v redis-server >/dev/null || die "redis-server is not installed (run scripts/install-deps.sh)"

# The port the running instance was started on wins over --port for stop/status.
saved_port() {
    local p=""
    [[ -f $DIR/port ]] && read -r p <"$DIR/port"
    [[ $p =~ ^[0-9]+$ ]] && printf '%s\n' "$p"
    return 0
}

ping() {
    timeout 5 redis-cli -h 127.0.0.1 -p "$1" ping 2>&1 </dev/null || true
}

do_status() {
    local pid port reply
    pid=$(pid_of "$PIDFILE" "$DIR")
    if [[ -z $pid ]]; then
        say "$LABEL: stopped"
        return 3
    fi
    port=$(saved_port)
    port=${port:-$PORT}
    reply=$(ping "$port")
    if [[ $reply == PONG ]]; then
        say "$LABEL: running (pid $pid, 127.0.0.1:$port, $DIR)"
        return 0
    fi
    say "$LABEL: process $pid is up but does not answer PING on port $port: $reply"
    return 1
}

do_stop() {
    local pid
    pid=$(pid_of "$PIDFILE" "$DIR")
    if [[ -z $pid ]]; then
        rm -f "$PIDFILE"
        info "not running"
        return 0
    fi
    # SIGTERM: Redis fsyncs the AOF and exits.
    if ! terminate "${PUSH_REDIS_STOP_TIMEOUT:-30}" "$pid"; then
        tail_logs "$LOG"
        die "$LABEL: PID $pid is still running"
    fi
    kill_session "$pid"
    rm -f "$PIDFILE"
    info "stopped"
}

do_start() {
    local pid port reply deadline started timeout
    pid=$(pid_of "$PIDFILE" "$DIR")
    if [[ -n $pid ]]; then
        port=$(saved_port)
        if [[ -n $PORT_GIVEN && -n $port && $port != "$PORT" ]]; then
            die "$LABEL is already running on port $port (asked for $PORT); stop it first"
        fi
        PORT=${port:-$PORT}
    else
        if port_open "$PORT"; then
            die "$LABEL: port $PORT on 127.0.0.1 is already in use by another process"
        fi
        mkdir -p "$DIR/data"
        printf '%s\n' "$PORT" >"$DIR/port"
        [[ -n $NODE_TIMEOUT ]] && printf '%s\n' "$NODE_TIMEOUT" >"$DIR/cluster-node-timeout"
        local cluster=()
        if [[ -f $DIR/cluster-node-timeout ]]; then
            read -r NODE_TIMEOUT <"$DIR/cluster-node-timeout"
            cluster=(--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$NODE_TIMEOUT")
        fi
        started=$(now_ms)
        spawn_detached "$DIR" "$PIDFILE" "$LOG" \
            redis-server --port "$PORT" --bind 127.0.0.1 --protected-mode yes \
            --dir "$DIR/data" --daemonize no --logfile "$LOG" \
            --appendonly yes --appendfsync everysec --save "" "${cluster[@]}"
        pid=$(read_pid "$PIDFILE")
    fi

    # Ready when it answers PONG; while it is LOADING a large AOF, give it longer.
    timeout=${PUSH_REDIS_START_TIMEOUT:-10}
    deadline=$(($(now_ms) + timeout * 1000))
    while :; do
        reply=$(ping "$PORT")
        [[ $reply == PONG ]] && break
        if ! alive "$pid"; then
            tail_logs "$LOG"
            rm -f "$PIDFILE"
            die "$LABEL exited during start-up"
        fi
        if [[ $reply == *LOADING* ]]; then
            deadline=$(($(now_ms) + timeout * 1000))
        fi
        if (($(now_ms) >= deadline)); then
            tail_logs "$LOG"
            warn "$LABEL did not answer PING within ${timeout}s (last reply: ${reply:-none}); stopping it"
            do_stop >/dev/null || true
            exit 1
        fi
        sleep 0.05
    done
    if [[ -n ${started:-} ]]; then
        info "started (pid $pid, 127.0.0.1:$PORT, $(($(now_ms) - started)) ms)"
    else
        info "already running (pid $pid, 127.0.0.1:$PORT)"
    fi
}

# kill: SIGKILL, as a crash or an OOM kill would.
do_kill() {
    local pid
    pid=$(pid_of "$PIDFILE" "$DIR")
    [[ -n $pid ]] || { info "not running"; return 0; }
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone 5 "$pid" || die "$LABEL: PID $pid survived SIGKILL"
    rm -f "$PIDFILE"
    info "killed (pid $pid)"
}

if [[ ! -d $DIR ]]; then
    case $VERB in
        status) say "$LABEL: stopped"; exit 3 ;;
        stop | kill) info "not running"; exit 0 ;;
    esac
fi
[[ $VERB == status ]] || lock_instance "$DIR"
case $VERB in
    start) do_start ;;
    stop) do_stop ;;
    kill) do_kill ;;
    restart)
        do_stop
        do_start
        ;;
    status)
        rc=0
        do_status || rc=$?
        exit "$rc"
        ;;
esac
