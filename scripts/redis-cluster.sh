#!/usr/bin/env bash
# A Redis Cluster of local nodes on 127.0.0.1, for the cluster tests and for trying failover by
# hand. Each node is a scripts/redis.sh instance started in cluster mode.
#
#   scripts/redis-cluster.sh start|stop|status|url|nodes|wait [--name NAME] [--port PORT]
#                            [--masters M] [--replicas R] [--node-timeout MS]
#   scripts/redis-cluster.sh kill-node|start-node I [--name NAME]
#
# Nodes NAME-1 … NAME-N (N = M × (1 + R); default --name cluster, --port 6501, 3 masters with 1
# replica each, --node-timeout 2000) listen on PORT … PORT+N-1 and on the cluster bus 10000 above.
# `start` is idempotent: the first time it creates the cluster (redis-cli --cluster create, slots
# split evenly over the masters, which are nodes 1 … M; each replica follows one of them); it returns
# once every node reports cluster_state:ok. The cluster's settings are kept in
# ${PUSH_LOCAL_DIR:-<package root>/.local}/redis-cluster-NAME/ (port, masters, replicas).
# `stop` stops every node (data and nodes.conf kept); `status` prints each node and exits 0 when all
# run; `url` prints the PUSH_REDIS_URL naming every node (redis+cluster://127.0.0.1:PORT,…);
# `nodes` prints one line per node: index, port, role (master/replica/down), and the slot ranges a
# master serves or the index a replica follows; `wait` returns once every running node reports
# cluster_state:ok and sees every slot served (at most 60 s). `kill-node I` SIGKILLs node I (its
# replica takes over after the node timeout); `start-node I` starts it again (it rejoins, as a
# replica of whoever took over).
# Environment: PUSH_LOCAL_DIR, PUSH_QUIET=1.
set -euo pipefail

usage() {
    sed -n '2,23s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

VERB="" NAME=cluster PORT=6501 MASTERS=3 REPLICAS=1 NODE_TIMEOUT=2000 INDEX=""
PORT_GIVEN=""
while (($#)); do
    case $1 in
        --name) NAME=${2:?--name needs a value}; shift 2 ;;
        --port) PORT=${2:?--port needs a value}; PORT_GIVEN=1; shift 2 ;;
        --masters) MASTERS=${2:?--masters needs a value}; shift 2 ;;
        --replicas) REPLICAS=${2:?--replicas needs a value}; shift 2 ;;
        --node-timeout) NODE_TIMEOUT=${2:?--node-timeout needs milliseconds}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        start | stop | status | url | nodes | wait) [[ -z $VERB ]] || { usage >&2; exit 2; }; VERB=$1; shift ;;
        kill-node | start-node)
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
command -v redis-cli >/dev/null || die "redis-cli is not installed (run scripts/install-deps.sh)"

DIR="$PUSH_LOCAL_DIR/redis-cluster-$NAME"
LABEL="redis cluster $NAME"
info() { [[ ${PUSH_QUIET:-} == 1 ]] || say "$LABEL: $*"; }

# What the cluster was created with wins over the flags for later verbs.
if [[ -f $DIR/settings ]]; then
    read -r saved_port MASTERS REPLICAS NODE_TIMEOUT <"$DIR/settings"
    [[ -z $PORT_GIVEN ]] && PORT=$saved_port
fi
[[ $MASTERS =~ ^[1-9]$ && $REPLICAS =~ ^[0-3]$ ]] || die "invalid --masters/--replicas ($MASTERS/$REPLICAS)"
((MASTERS >= 3)) || die "a Redis Cluster needs at least 3 masters"
NODES=$((MASTERS * (1 + REPLICAS)))
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT >= 1024 && PORT + NODES + 10000 <= 65535)) || die "invalid --port '$PORT'"

node_port() { printf '%s\n' $((PORT + $1 - 1)); }
node() {
    local index=$1 verb=$2
    shift 2
    PUSH_QUIET=1 bash "$SCRIPTS/redis.sh" "$verb" --name "$NAME-$index" --port "$(node_port "$index")" "$@"
}
cli() {
    local port=$1
    shift
    timeout 10 redis-cli -h 127.0.0.1 -p "$port" "$@" </dev/null
}

check_index() {
    [[ $INDEX =~ ^[0-9]+$ ]] && ((INDEX >= 1 && INDEX <= NODES)) || die "no node $INDEX (the cluster has $NODES)"
}

# cluster_ok PORT RUNNING_PORTS: the node at PORT reports cluster_state:ok and sees every slot
# served by a master among RUNNING_PORTS (so a killed master counts only once its replica took over).
cluster_ok() {
    local info nodes
    info=$(cli "$1" cluster info 2>/dev/null) || return 1
    [[ $info == *"cluster_state:ok"* && $info == *"cluster_slots_ok:16384"* ]] || return 1
    nodes=$(cli "$1" cluster nodes 2>/dev/null) || return 1
    python3 -c 'import sys
running = set(sys.argv[2].split())
served = 0
for line in sys.argv[1].splitlines():
    f = line.split()
    if "master" in f[2] and "fail" not in f[2] and f[1].split("@")[0].rsplit(":", 1)[1] in running:
        for r in f[8:]:
            if r.startswith("["): continue
            a, _, b = r.partition("-")
            served += int(b or a) - int(a) + 1
sys.exit(0 if served == 16384 else 1)' "$nodes" "$2"
}

do_wait() {
    local deadline index all running
    deadline=$(($(now_ms) + ${1:-60} * 1000))
    while :; do
        all=1
        running=""
        for ((index = 1; index <= NODES; index++)); do
            node "$index" status >/dev/null 2>&1 && running+=" $(node_port "$index")"
        done
        for ((index = 1; index <= NODES; index++)); do
            [[ " $running " == *" $(node_port "$index") "* ]] || continue
            cluster_ok "$(node_port "$index")" "$running" || { all=""; break; }
        done
        [[ -n $all ]] && return 0
        (($(now_ms) >= deadline)) && die "$LABEL: not every node reports cluster_state:ok within ${1:-60}s"
        sleep 0.1
    done
}

do_start() {
    local index created=""
    mkdir -p "$DIR"
    printf '%s %s %s %s\n' "$PORT" "$MASTERS" "$REPLICAS" "$NODE_TIMEOUT" >"$DIR/settings"
    for ((index = 1; index <= NODES; index++)); do
        node "$index" start --cluster-node-timeout "$NODE_TIMEOUT" || die "$LABEL: node $index did not start"
    done
    # A fresh set of nodes knows only itself: create the cluster once.
    if [[ $(cli "$(node_port 1)" cluster info) == *"cluster_known_nodes:1"* ]]; then
        local addresses=()
        for ((index = 1; index <= NODES; index++)); do addresses+=("127.0.0.1:$(node_port "$index")"); done
        redis-cli --cluster create "${addresses[@]}" --cluster-replicas "$REPLICAS" --cluster-yes </dev/null >"$DIR/create.log" 2>&1 ||
            { tail_logs "$DIR/create.log"; die "$LABEL: redis-cli --cluster create failed"; }
        created=1
    fi
    do_wait 60
    info "${created:+created and }running: $MASTERS masters, $REPLICAS replica(s) each, on 127.0.0.1:$PORT…$(node_port "$NODES")"
}

do_stop() {
    local index
    for ((index = NODES; index >= 1; index--)); do
        node "$index" stop || warn "$LABEL: node $index did not stop"
    done
    info "stopped"
}

do_status() {
    local index rc=0
    for ((index = 1; index <= NODES; index++)); do
        PUSH_QUIET="" bash "$SCRIPTS/redis.sh" status --name "$NAME-$index" || rc=1
    done
    return "$rc"
}

do_url() {
    local index url="redis+cluster://127.0.0.1:$(node_port 1)"
    for ((index = 2; index <= NODES; index++)); do url+=",127.0.0.1:$(node_port "$index")"; done
    say "$url"
}

# nodes: INDEX PORT ROLE DETAIL, from the first running node's CLUSTER NODES.
do_nodes() {
    local index listing=""
    for ((index = 1; index <= NODES; index++)); do
        listing=$(cli "$(node_port "$index")" cluster nodes 2>/dev/null) && break
    done
    [[ -n $listing ]] || die "$LABEL: no node answers"
    python3 - "$PORT" "$NODES" "$listing" <<'EOF'
import sys
base, count, listing = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
by_id, rows = {}, []
for line in listing.splitlines():
    f = line.split()
    port = int(f[1].split("@")[0].rsplit(":", 1)[1])
    by_id[f[0]] = port - base + 1
    rows.append((port - base + 1, port, f[2], f[3], f[8:]))
for index, port, flags, master, slots in sorted(rows):
    if "fail" in flags.split(","):
        role, detail = "down", ""
    elif "master" in flags:
        role, detail = "master", " ".join(s for s in slots if not s.startswith("["))
    else:
        role, detail = "replica", f"of {by_id.get(master, '?')}"
    print(index, port, role, detail)
EOF
}

case $VERB in
    start) do_start ;;
    stop) [[ -d $DIR ]] && do_stop || info "not running" ;;
    status) [[ -d $DIR ]] || { say "$LABEL: stopped"; exit 3; }; do_status ;;
    url) do_url ;;
    nodes) do_nodes ;;
    wait) do_wait 60 ;;
    kill-node) check_index; node "$INDEX" kill ;;
    start-node) check_index; node "$INDEX" start ;;
esac
