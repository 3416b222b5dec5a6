#!/usr/bin/env bash
# A RabbitMQ cluster of local nodes on 127.0.0.1, for the cluster tests and for trying failover by
# hand. Each node is a scripts/rabbitmq.sh instance; this script owns what they share.
#
#   scripts/rabbitmq-cluster.sh start|stop|status|url [--name NAME] [--port PORT] [--nodes N]
#   scripts/rabbitmq-cluster.sh kill-node|start-node|stop-node I [--name NAME]
#   scripts/rabbitmq-cluster.sh members --queue QUEUE [--name NAME]
#
# Nodes NAME-1 … NAME-N (N default 3, node names push-NAME-I@localhost) listen for AMQP on
# PORT, PORT+20, PORT+40, … (default --name cluster, --port 5800); each derives its Erlang
# distribution port as scripts/rabbitmq.sh does (PORT_I+20000, rabbitmqctl PORT_I+21000…+21010). They
# register with one shared epmd on PORT+1000 and share one Erlang cookie, both kept in
# ${PUSH_LOCAL_DIR:-<package root>/.local}/rabbitmq-cluster-NAME/ (epmd.pid, .erlang.cookie, nodes,
# port). Node 1 starts first; the others join its cluster. The policies of
# deploy/rabbitmq/policies.json are set (they are cluster-wide).
#
# `start` is idempotent and returns once every node runs and the cluster lists all of them;
# `stop` stops every node, then the epmd; `status` prints each node's state and exits 0 when all
# run; `url` prints the PUSH_AMQP_URL that lists every node (amqp://guest:guest@127.0.0.1:PORT/%2f,
# 127.0.0.1:PORT+20, …). `kill-node I` SIGKILLs node I (its data is kept); `start-node I` starts it
# again (it rejoins by itself); `stop-node I` stops it gracefully. `members --queue Q` prints the
# nodes holding a replica of quorum queue Q, one per line.
# Environment: PUSH_LOCAL_DIR, PUSH_QUIET=1, and scripts/rabbitmq.sh's.
set -euo pipefail

usage() {
    sed -n '2,24s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

VERB="" NAME=cluster PORT=5800 NODES=3 INDEX="" QUEUE=""
PORT_GIVEN=""
while (($#)); do
    case $1 in
        --name) NAME=${2:?--name needs a value}; shift 2 ;;
        --port) PORT=${2:?--port needs a value}; PORT_GIVEN=1; shift 2 ;;
        --nodes) NODES=${2:?--nodes needs a value}; shift 2 ;;
        --queue) QUEUE=${2:?--queue needs a value}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        start | stop | status | url | members) [[ -z $VERB ]] || { usage >&2; exit 2; }; VERB=$1; shift ;;
        kill-node | start-node | stop-node)
            [[ -z $VERB ]] || { usage >&2; exit 2; }
            VERB=$1
            INDEX=${2:?$1 needs a node number}
            shift 2
            ;;
        *) usage >&2; exit 2 ;;
    esac
done
[[ -n $VERB ]] || { usage >&2; exit 2; }
[[ $NAME =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || die "invalid --name '$NAME' (letters, digits, . _ -)"
[[ $NODES =~ ^[1-9]$ ]] || die "invalid --nodes '$NODES' (1-9)"

DIR="$PUSH_LOCAL_DIR/rabbitmq-cluster-$NAME"
EPMD_PIDFILE="$DIR/epmd.pid"
COOKIE="$DIR/.erlang.cookie"
LABEL="rabbitmq cluster $NAME"
info() { [[ ${PUSH_QUIET:-} == 1 ]] || say "$LABEL: $*"; }

# The port and node count the cluster was started with win over the flags for later verbs.
if [[ -f $DIR/port && -z $PORT_GIVEN ]]; then read -r PORT <"$DIR/port"; fi
if [[ -f $DIR/nodes ]]; then read -r NODES <"$DIR/nodes"; fi
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT >= 1024 && PORT + 20 * (NODES - 1) <= 44525)) || die "invalid --port '$PORT'"
EPMD_PORT=$((PORT + 1000))

node_port() { printf '%s\n' $((PORT + 20 * ($1 - 1))); }
node_name() { printf 'push-%s-%s@localhost\n' "$NAME" "$1"; }
node() {
    local index=$1 verb=$2
    shift 2
    bash "$SCRIPTS/rabbitmq.sh" "$verb" --name "$NAME-$index" --port "$(node_port "$index")" "$@"
}

check_index() {
    [[ $INDEX =~ ^[0-9]+$ ]] && ((INDEX >= 1 && INDEX <= NODES)) || die "no node $INDEX (the cluster has $NODES)"
}

epmd_start() {
    local pid i
    pid=$(pid_of "$EPMD_PIDFILE" "$DIR")
    if [[ -z $pid ]]; then
        port_open "$EPMD_PORT" && die "$LABEL: the epmd port $EPMD_PORT is already in use by another process"
        spawn_detached "$DIR" "$EPMD_PIDFILE" "$DIR/epmd.log" "$(command -v epmd)" -port "$EPMD_PORT" -address 127.0.0.1
        pid=$(read_pid "$EPMD_PIDFILE")
    fi
    for ((i = 0; i < 100; i++)); do
        port_open "$EPMD_PORT" && return 0
        alive "$pid" || break
        sleep 0.05
    done
    tail_logs "$DIR/epmd.log"
    die "$LABEL: epmd did not come up on 127.0.0.1:$EPMD_PORT"
}

# members: the cluster's running nodes as node 1 (or any running node) sees them.
running_members() {
    local index
    for ((index = 1; index <= NODES; index++)); do
        if node "$index" status >/dev/null 2>&1; then
            node "$index" ctl -- -q cluster_status --formatter json 2>/dev/null |
                python3 -c 'import json,sys; print(" ".join(sorted(json.load(sys.stdin).get("running_nodes", []))))'
            return 0
        fi
    done
}

do_start() {
    local index want
    mkdir -p "$DIR"
    printf '%s\n' "$PORT" >"$DIR/port"
    printf '%s\n' "$NODES" >"$DIR/nodes"
    if [[ ! -s $COOKIE ]]; then
        (umask 077 && od -An -tx1 -N20 /dev/urandom | tr -d ' \n' >"$COOKIE")
        chmod 400 "$COOKIE"
    fi
    command -v epmd >/dev/null || die "epmd (erlang-base) is not installed (run scripts/install-deps.sh)"
    epmd_start
    for ((index = 1; index <= NODES; index++)); do
        local join=()
        ((index > 1)) && join=(--join "$(node_name 1)")
        PUSH_QUIET=1 node "$index" start --cluster-epmd-port "$EPMD_PORT" --cookie-file "$COOKIE" "${join[@]}" ||
            die "$LABEL: node $index did not start"
    done
    want=$(for ((index = 1; index <= NODES; index++)); do node_name "$index"; done | sort | tr '\n' ' ')
    [[ "$(running_members) " == "$want" ]] || die "$LABEL: the cluster lists '$(running_members)', expected '$want'"
    info "running: $NODES nodes on 127.0.0.1:$PORT…$(node_port "$NODES") (epmd $EPMD_PORT)"
}

do_stop() {
    local index pid
    for ((index = NODES; index >= 1; index--)); do
        PUSH_QUIET=1 node "$index" stop || warn "$LABEL: node $index did not stop"
    done
    pid=$(pid_of "$EPMD_PIDFILE" "$DIR")
    if [[ -n $pid ]]; then
        terminate 10 "$pid" || die "$LABEL: epmd (PID $pid) is still running"
    fi
    rm -f "$EPMD_PIDFILE"
    info "stopped"
}

do_status() {
    local index rc=0
    for ((index = 1; index <= NODES; index++)); do
        node "$index" status || rc=1
    done
    say "$LABEL: running members: $(running_members)"
    return "$rc"
}

do_members() {
    local index
    [[ -n $QUEUE ]] || die "members needs --queue QUEUE"
    for ((index = 1; index <= NODES; index++)); do
        if node "$index" status >/dev/null 2>&1; then
            node "$index" ctl -- -q list_queues name members --formatter json |
                python3 -c 'import json,sys
for q in json.load(sys.stdin):
    if q["name"] == sys.argv[1]:
        print("\n".join(q["members"]))
        sys.exit(0)
sys.exit("no queue " + sys.argv[1])' "$QUEUE"
            return
        fi
    done
    die "$LABEL: no node is running"
}

do_url() {
    local index url="amqp://guest:guest@127.0.0.1:$(node_port 1)/%2f"
    for ((index = 2; index <= NODES; index++)); do url+=",127.0.0.1:$(node_port "$index")"; done
    say "$url"
}

case $VERB in
    start) do_start ;;
    stop) [[ -d $DIR ]] && do_stop || info "not running" ;;
    status) [[ -d $DIR ]] || { say "$LABEL: stopped"; exit 3; }; do_status ;;
    url) do_url ;;
    members) do_members ;;
    kill-node) check_index; node "$INDEX" kill ;;
    stop-node) check_index; node "$INDEX" stop ;;
    start-node)
        check_index
        epmd_start
        node "$INDEX" start --cluster-epmd-port "$EPMD_PORT" --cookie-file "$COOKIE"
        ;;
esac
