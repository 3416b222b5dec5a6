#!/usr/bin/env bash
# A local RabbitMQ node on 127.0.0.1, one per name, for development and tests (no systemd needed).
#
#   scripts/rabbitmq.sh start|stop|restart|status [--name NAME] [--port PORT] [--tls-port PORT]
#                       [--management-port PORT]
#   scripts/rabbitmq.sh close-connections --matching TEXT [--name NAME] [--port PORT]
#   scripts/rabbitmq.sh ctl [--name NAME] -- RABBITMQCTL-ARGS...   (rabbitmqctl against the instance)
#   scripts/rabbitmq.sh kill [--name NAME]   (SIGKILL of the node, as a crash would: data kept)
#   cluster members (scripts/rabbitmq-cluster.sh starts them): start ... --cluster-epmd-port PORT
#                       --cookie-file FILE [--join NODE]
#
# Instance directory: ${PUSH_LOCAL_DIR:-<package root>/.local}/rabbitmq-NAME/
#   mnesia/ (data), log/ (rabbit.log, console.log, epmd.log), rabbitmq.pid, launcher.pid, epmd.pid,
#   rabbitmq.conf, enabled_plugins (none, or rabbitmq_management), .erlang.cookie (HOME), port,
#   tls-port, management-port, tls/
# Defaults: --name dev, --port 5672 (AMQP). Node push-NAME@localhost, user guest/guest.
# Ports derived from PORT so several nodes run side by side: private epmd PORT+1000, Erlang
# distribution PORT+20000, rabbitmqctl's distribution PORT+21000..PORT+21010 (PORT <= 44525).
# --tls-port (start, restart): also an AMQPS listener on 127.0.0.1:TLS_PORT. Its certificates are
#   made with openssl at the first TLS start and reused: tls/ca.pem + ca.key (a CA of this instance),
#   server.pem + server.key (signed by it, subjectAltName DNS:localhost only, so clients connect to
#   `localhost`), client.pem + client.key (signed by it, for client-certificate tests). Clients
#   must present a certificate signed by that CA (verify_peer, fail_if_no_peer_cert): a client
#   whose certificate is missing or from another CA is refused.
# --management-port (start, restart): also the management plugin (HTTP API) on 127.0.0.1:PORT, as
#   the rabbitmq:*-management image has it on 15672 (scripts/checks/compose.sh uses it).
# `start` is idempotent and returns once the node has booted (rabbitmqctl wait), the policies of
# deploy/rabbitmq/policies.json are set and, with TLS, the TLS port accepts connections; `stop` stops
# the node and its epmd by PID and waits until they have exited; `restart` keeps the data, the TLS
# and the management port (unless --tls-port or --management-port gives another).
# --cluster-epmd-port (start): the node registers with an epmd on 127.0.0.1:PORT that the caller
#   runs for the whole cluster (nodes find each other there), instead of a private one; remembered
#   for later verbs. --cookie-file: the instance's Erlang cookie is copied from FILE (a cluster
#   shares one). --join NODE: once booted, the node joins NODE's cluster (stop_app, join_cluster,
#   start_app) unless it is a member already; a restarted member rejoins by itself.
# `status` exits 0 when running, 3 when stopped. `close-connections` has the broker close every client
#   connection whose name (the client's connection_name) contains TEXT, as an operator's
#   `rabbitmqctl close_connection` would (fault tests), and prints how many it closed.
# Environment: PUSH_LOCAL_DIR, PUSH_RABBITMQ_START_TIMEOUT (s, default 60), PUSH_QUIET=1.
set -euo pipefail

usage() {
    sed -n '2,39s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# --tls-port is this script's own; lib.sh parses the rest.
TLS_PORT=""
MGMT_PORT=""
MATCHING=""
CLUSTER_EPMD_PORT=""
COOKIE_FILE=""
JOIN_NODE=""
CTL_ARGS=()
args=()
while (($#)); do
    case $1 in
        --matching) MATCHING=${2:?--matching needs a value}; shift 2 ;;
        --matching=*) MATCHING=${1#*=}; shift ;;
        --tls-port) TLS_PORT=${2:?--tls-port needs a value}; shift 2 ;;
        --tls-port=*) TLS_PORT=${1#*=}; shift ;;
        --management-port) MGMT_PORT=${2:?--management-port needs a value}; shift 2 ;;
        --management-port=*) MGMT_PORT=${1#*=}; shift ;;
        --cluster-epmd-port) CLUSTER_EPMD_PORT=${2:?--cluster-epmd-port needs a value}; shift 2 ;;
        --cookie-file) COOKIE_FILE=${2:?--cookie-file needs a value}; shift 2 ;;
        --join) JOIN_NODE=${2:?--join needs a node name}; shift 2 ;;
        --) shift; CTL_ARGS=("$@"); break ;;
        *) args+=("$1"); shift ;;
    esac
done
EXTRA_VERBS="close-connections ctl kill" parse_instance_args 5672 "${args[@]}"
((PORT <= 44525)) || die "--port $PORT is too high: the derived ports (PORT+21010) must stay below 65536"
if [[ -n $TLS_PORT ]]; then
    if ! [[ $TLS_PORT =~ ^[0-9]+$ ]] || ((TLS_PORT < 1024 || TLS_PORT > 65535)); then
        die "invalid --tls-port '$TLS_PORT'"
    fi
    TLS_PORT=$((10#$TLS_PORT))
    if ((TLS_PORT == PORT || TLS_PORT == PORT + 1000 || TLS_PORT == PORT + 20000 ||
        (TLS_PORT >= PORT + 21000 && TLS_PORT <= PORT + 21010))); then
        die "--tls-port $TLS_PORT clashes with --port $PORT or a port derived from it"
    fi
fi

if [[ -n $MGMT_PORT ]]; then
    if ! [[ $MGMT_PORT =~ ^[0-9]+$ ]] || ((MGMT_PORT < 1024 || MGMT_PORT > 65535)); then
        die "invalid --management-port '$MGMT_PORT'"
    fi
    MGMT_PORT=$((10#$MGMT_PORT))
    if ((MGMT_PORT == PORT || MGMT_PORT == PORT + 1000 || MGMT_PORT == PORT + 20000 ||
        (MGMT_PORT >= PORT + 21000 && MGMT_PORT <= PORT + 21010))) || [[ $MGMT_PORT == "$TLS_PORT" ]]; then
        die "--management-port $MGMT_PORT clashes with --port $PORT, --tls-port or a port derived from them"
    fi
fi

if [[ -n $CLUSTER_EPMD_PORT ]] && { ! [[ $CLUSTER_EPMD_PORT =~ ^[0-9]+$ ]] || ((CLUSTER_EPMD_PORT < 1024 || CLUSTER_EPMD_PORT > 65535)); }; then
    die "invalid --cluster-epmd-port '$CLUSTER_EPMD_PORT'"
fi
[[ -z $COOKIE_FILE || -r $COOKIE_FILE ]] || die "--cookie-file $COOKIE_FILE is not readable"
[[ -z $JOIN_NODE || $JOIN_NODE =~ ^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+$ ]] || die "invalid --join '$JOIN_NODE' (a node name, name@host)"

RMQ_BIN="${PUSH_RABBITMQ_BIN_DIR:-/usr/lib/rabbitmq/bin}"
DIR="$PUSH_LOCAL_DIR/rabbitmq-$NAME"
LOGDIR="$DIR/log"
PIDFILE="$DIR/rabbitmq.pid"    # written by the node itself: the beam.smp PID
LAUNCHER="$DIR/launcher.pid"   # the rabbitmq-server wrapper (its session holds every process)
EPMD_PIDFILE="$DIR/epmd.pid"
TLS_DIR="$DIR/tls"
LABEL="rabbitmq $NAME"

info() { [[ ${PUSH_QUIET:-} == 1 ]] || say "$LABEL: $*"; }

[[ -x $RMQ_BIN/rabbitmq-server ]] || die "RabbitMQ is not installed ($RMQ_BIN/rabbitmq-server; run scripts/install-deps.sh)"
EPMD=$(command -v epmd || true)
[[ -n $EPMD ]] || die "epmd (erlang-base) is not installed (run scripts/install-deps.sh)"

# saved_port [FILE]: the port the instance was last started with (FILE `port`, or `tls-port`:
# nothing if it was started without TLS).
saved_port() {
    local p="" file="$DIR/${1:-port}"
    [[ -f $file ]] && read -r p <"$file"
    [[ $p =~ ^[0-9]+$ ]] && printf '%s\n' "$p"
    return 0
}

# node_env AMQP_PORT: the environment rabbitmq-server and rabbitmqctl share (same HOME → same
# cookie, same node name, same private epmd). Nothing from /etc/rabbitmq is read.
node_env() {
    local port=$1
    # Whatever the caller had must not leak in (e.g. another node's settings).
    local v
    for v in $(compgen -e); do
        case $v in RABBITMQ_* | ERL_EPMD_* | NOTIFY_SOCKET) unset "$v" ;; esac
    done
    export HOME="$DIR"
    export RABBITMQ_NODENAME="push-$NAME@localhost"
    export RABBITMQ_USE_LONGNAME=false
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$port"
    export RABBITMQ_DIST_PORT=$((port + 20000))
    local cluster_epmd
    cluster_epmd=${CLUSTER_EPMD_PORT:-$(saved_port cluster-epmd-port)}
    export ERL_EPMD_PORT=${cluster_epmd:-$((port + 1000))}
    export ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_CTL_DIST_PORT_MIN=$((port + 21000))
    export RABBITMQ_CTL_DIST_PORT_MAX=$((port + 21010))
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    # -start_epmd false: use our private epmd (started and stopped by PID here), never spawn one.
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false"
    export RABBITMQ_MNESIA_BASE="$DIR/mnesia"
    export RABBITMQ_LOG_BASE="$LOGDIR"
    export RABBITMQ_LOGS="$LOGDIR/rabbit.log"
    # An Erlang VM that dies (the node, or rabbitmqctl's) writes erl_crash.dump into its working
    # directory unless told otherwise: keep it with the node's logs, never in the work tree.
    export ERL_CRASH_DUMP="$LOGDIR/erl_crash.dump"
    export RABBITMQ_PID_FILE="$PIDFILE"
    export RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf"
    export RABBITMQ_CONFIG_FILE="$DIR/rabbitmq.conf"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$DIR/advanced.config"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins"
    export RABBITMQ_PLUGINS_EXPAND_DIR="$DIR/plugins-expand"
}

ctl() {
    "$RMQ_BIN/rabbitmqctl" "$@" </dev/null
}

write_config() {
    mkdir -p "$LOGDIR" "$DIR/mnesia"
    : >"$DIR/rabbitmq-env.conf"
    if [[ -n $MGMT_PORT ]]; then
        printf '[rabbitmq_management].\n' >"$DIR/enabled_plugins"
    else
        printf '[].\n' >"$DIR/enabled_plugins"
    fi
    cat >"$DIR/rabbitmq.conf" <<'EOF'
# Generated by scripts/rabbitmq.sh (rewritten at every start).
log.console = false
log.file.level = info
# A development node: don't block publishers on a busy laptop disk.
disk_free_limit.absolute = 50MB
EOF
    if [[ -n $TLS_PORT ]]; then
        cat >>"$DIR/rabbitmq.conf" <<EOF
# AMQPS (--tls-port); the plain listener comes from RABBITMQ_NODE_IP_ADDRESS/RABBITMQ_NODE_PORT.
listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $TLS_DIR/ca.pem
ssl_options.certfile = $TLS_DIR/server.pem
ssl_options.keyfile = $TLS_DIR/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = true
EOF
    fi
    if [[ -n $MGMT_PORT ]]; then
        cat >>"$DIR/rabbitmq.conf" <<EOF
# The management plugin's HTTP API (--management-port).
management.tcp.ip = 127.0.0.1
management.tcp.port = $MGMT_PORT
EOF
    fi
    # One cookie per instance, created before the first start so the node and rabbitmqctl (both
    # with HOME=DIR) can never race to create different ones.
    if [[ -n $COOKIE_FILE ]] && ! cmp -s "$COOKIE_FILE" "$DIR/.erlang.cookie"; then
        rm -f "$DIR/.erlang.cookie"
        (umask 077 && cp "$COOKIE_FILE" "$DIR/.erlang.cookie")
        chmod 400 "$DIR/.erlang.cookie"
    fi
    if [[ ! -s $DIR/.erlang.cookie ]]; then
        (umask 077 && od -An -tx1 -N20 /dev/urandom | tr -d ' \n' >"$DIR/.erlang.cookie")
        chmod 400 "$DIR/.erlang.cookie"
    fi
}

# make_certificates DIR: a CA, a server certificate for localhost and a client certificate, both
# signed by the CA, into DIR (see the usage text).
make_certificates() {
    local dir=$1
    cat >"$dir/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
# No IP:127.0.0.1: rabbitmq-c (0.11) checks DNS names only, and a name left out lets tests check
# that host names are verified (amqps://127.0.0.1 must fail, amqps://localhost succeed).
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
    # Called as an `if` condition, where set -e does not apply: every step checks its own status.
    (
        umask 077
        cd "$dir" || exit 1
        openssl req -x509 -new -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 \
            -subj "/CN=push local CA (rabbitmq $NAME)" -config openssl.cnf -extensions ca || exit 1
        for leaf in server:localhost "client:push-$NAME-client"; do
            openssl req -new -newkey rsa:2048 -nodes -keyout "${leaf%%:*}.key" -out "${leaf%%:*}.csr" \
                -subj "/CN=${leaf#*:}" -config openssl.cnf || exit 1
            openssl x509 -req -in "${leaf%%:*}.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -CAserial ca.srl \
                -out "${leaf%%:*}.pem" -days 3650 -extfile openssl.cnf -extensions "${leaf%%:*}" || exit 1
            rm -f "${leaf%%:*}.csr"
        done
        # Certificates are public; keys stay readable by this user only.
        chmod 644 ca.pem server.pem client.pem
    )
}

# ensure_certificates: the instance's certificates in TLS_DIR, made once (all or nothing).
ensure_certificates() {
    local f missing="" tmp="$DIR/tls.new"
    for f in ca.key ca.pem server.key server.pem client.key client.pem; do
        [[ -s $TLS_DIR/$f ]] || missing=1
    done
    [[ -z $missing ]] && return 0
    command -v openssl >/dev/null || die "$LABEL: openssl is not installed (needed for --tls-port)"
    rm -rf "$tmp"
    mkdir -p "$tmp" "$LOGDIR"
    if ! make_certificates "$tmp" >"$LOGDIR/openssl.log" 2>&1; then
        tail_logs "$LOGDIR/openssl.log"
        rm -rf "$tmp"
        die "$LABEL: could not make the TLS certificates"
    fi
    rm -rf "$TLS_DIR"
    mv "$tmp" "$TLS_DIR"
    info "made TLS certificates in $TLS_DIR"
}

# cluster_epmd: the cluster's shared epmd port when this node is a cluster member (its caller runs
# that epmd), else nothing.
cluster_epmd() {
    local p=${CLUSTER_EPMD_PORT:-$(saved_port cluster-epmd-port)}
    [[ -n $p ]] && printf '%s\n' "$p"
    return 0
}

epmd_start() {
    local pid i
    if [[ -n $(cluster_epmd) ]]; then
        port_open "$ERL_EPMD_PORT" || die "$LABEL: the cluster's epmd is not listening on 127.0.0.1:$ERL_EPMD_PORT"
        return 0
    fi
    pid=$(pid_of "$EPMD_PIDFILE" "$DIR")
    if [[ -z $pid ]]; then
        if port_open "$ERL_EPMD_PORT"; then
            die "$LABEL: the private epmd port $ERL_EPMD_PORT is already in use by another process"
        fi
        spawn_detached "$DIR" "$EPMD_PIDFILE" "$LOGDIR/epmd.log" \
            "$EPMD" -port "$ERL_EPMD_PORT" -address 127.0.0.1
        pid=$(read_pid "$EPMD_PIDFILE")
    fi
    for ((i = 0; i < 100; i++)); do
        port_open "$ERL_EPMD_PORT" && return 0
        alive "$pid" || break
        sleep 0.05
    done
    tail_logs "$LOGDIR/epmd.log"
    die "$LABEL: epmd did not come up on 127.0.0.1:$ERL_EPMD_PORT"
}

epmd_stop() {
    local pid
    [[ -n $(cluster_epmd) ]] && return 0
    pid=$(pid_of "$EPMD_PIDFILE" "$DIR")
    if [[ -n $pid ]]; then
        terminate 10 "$pid" || die "$LABEL: epmd (PID $pid) is still running"
        kill_session "$pid"
    fi
    rm -f "$EPMD_PIDFILE"
}

do_status() {
    local pid port tls_port tls
    pid=$(pid_of "$PIDFILE" "$DIR")
    if [[ -z $pid ]]; then
        say "$LABEL: stopped"
        return 3
    fi
    port=$(saved_port)
    port=${port:-$PORT}
    tls_port=$(saved_port tls-port)
    tls=${tls_port:+, TLS 127.0.0.1:$tls_port}
    node_env "$port"
    if timeout 30 "$RMQ_BIN/rabbitmqctl" -q ping </dev/null >/dev/null 2>&1; then
        say "$LABEL: running (pid $pid, 127.0.0.1:$port$tls, node $RABBITMQ_NODENAME, $DIR)"
        return 0
    fi
    say "$LABEL: process $pid is up but the node does not answer (port $port)"
    return 1
}

# apply_policies: sets every policy of deploy/rabbitmq/policies.json (the work queues' at-least-once
# dead-lettering; compose and Kubernetes apply the same file), idempotently, on every start.
apply_policies() {
    local file="$PUSH_ROOT/deploy/rabbitmq/policies.json" name pattern apply_to priority definition
    [[ -r $file ]] || die "$file is missing"
    while IFS=$'\t' read -r name pattern apply_to priority definition; do
        ctl -q set_policy --apply-to "$apply_to" --priority "$priority" "$name" "$pattern" "$definition" >>"$LOGDIR/ctl.log" 2>&1 ||
            die "rabbitmqctl set_policy $name failed (see $LOGDIR/ctl.log)"
    done < <(python3 -c 'import json,sys
for p in json.load(open(sys.argv[1]))["policies"]:
    print("\t".join([p["name"], p["pattern"], p.get("apply-to", "all"), str(p.get("priority", 0)), json.dumps(p["definition"])]))' "$file")
}

do_stop() {
    local pid launcher port
    pid=$(pid_of "$PIDFILE" "$DIR")
    launcher=$(pid_of "$LAUNCHER" "$DIR")
    port=$(saved_port)
    node_env "${port:-$PORT}"
    if [[ -z $pid && -z $launcher ]]; then
        rm -f "$PIDFILE" "$LAUNCHER"
        epmd_stop
        info "not running"
        return 0
    fi
    if [[ -n $pid ]]; then
        # Graceful: `rabbitmqctl stop PIDFILE` returns once the node's OS process has exited.
        if ! timeout "${PUSH_RABBITMQ_STOP_TIMEOUT:-60}" "$RMQ_BIN/rabbitmqctl" -q stop "$PIDFILE" \
            </dev/null >>"$LOGDIR/ctl.log" 2>&1; then
            warn "$LABEL: rabbitmqctl stop failed; stopping by signal"
        fi
    fi
    # The wrapper exits once the node has; anything still there gets SIGTERM, then SIGKILL.
    local pids=()
    [[ -n $pid ]] && pids+=("$pid")
    [[ -n $launcher ]] && pids+=("$launcher")
    if ! terminate 30 "${pids[@]}"; then
        tail_logs "$LOGDIR/rabbit.log"
        die "$LABEL: the node (PIDs ${pids[*]}) is still running"
    fi
    [[ -n $launcher ]] && kill_session "$launcher"
    rm -f "$PIDFILE" "$LAUNCHER"
    epmd_stop
    info "stopped"
}

do_start() {
    local pid launcher port tls_port mgmt_port started waiter deadline timeout rc
    pid=$(pid_of "$PIDFILE" "$DIR")
    launcher=$(pid_of "$LAUNCHER" "$DIR")
    if [[ -n $pid || -n $launcher ]]; then
        port=$(saved_port)
        if [[ -n $PORT_GIVEN && -n $port && $port != "$PORT" ]]; then
            die "$LABEL is already running on port $port (asked for $PORT); stop it first"
        fi
        PORT=${port:-$PORT}
        tls_port=$(saved_port tls-port)
        if [[ -n $TLS_PORT && $TLS_PORT != "$tls_port" ]]; then
            die "$LABEL is already running $([[ -n $tls_port ]] && echo "with TLS on port $tls_port" || echo "without TLS") (asked for TLS on $TLS_PORT); stop it first"
        fi
        TLS_PORT=$tls_port
        mgmt_port=$(saved_port management-port)
        if [[ -n $MGMT_PORT && $MGMT_PORT != "$mgmt_port" ]]; then
            die "$LABEL is already running $([[ -n $mgmt_port ]] && echo "with the management API on port $mgmt_port" || echo "without the management API") (asked for it on $MGMT_PORT); stop it first"
        fi
        MGMT_PORT=$mgmt_port
    fi
    node_env "$PORT"
    if [[ -z $pid && -z $launcher ]]; then
        if port_open "$PORT"; then
            die "$LABEL: port $PORT on 127.0.0.1 is already in use by another process"
        fi
        if port_open "$RABBITMQ_DIST_PORT"; then
            die "$LABEL: the distribution port $RABBITMQ_DIST_PORT is already in use by another process"
        fi
        if [[ -n $TLS_PORT ]]; then
            port_open "$TLS_PORT" && die "$LABEL: TLS port $TLS_PORT on 127.0.0.1 is already in use by another process"
            ensure_certificates
        fi
        if [[ -n $MGMT_PORT ]] && port_open "$MGMT_PORT"; then
            die "$LABEL: management port $MGMT_PORT on 127.0.0.1 is already in use by another process"
        fi
        write_config
        printf '%s\n' "$PORT" >"$DIR/port"
        if [[ -n $CLUSTER_EPMD_PORT ]]; then
            printf '%s\n' "$CLUSTER_EPMD_PORT" >"$DIR/cluster-epmd-port"
        elif [[ -z $(saved_port cluster-epmd-port) ]]; then
            rm -f "$DIR/cluster-epmd-port"
        fi
        if [[ -n $TLS_PORT ]]; then
            printf '%s\n' "$TLS_PORT" >"$DIR/tls-port"
        else
            rm -f "$DIR/tls-port"
        fi
        if [[ -n $MGMT_PORT ]]; then
            printf '%s\n' "$MGMT_PORT" >"$DIR/management-port"
        else
            rm -f "$DIR/management-port"
        fi
        started=$(now_ms)
        epmd_start
        rm -f "$PIDFILE"
        : >"$LOGDIR/console.log"
        spawn_detached "$DIR" "$LAUNCHER" "$LOGDIR/console.log" "$RMQ_BIN/rabbitmq-server"
        launcher=$(read_pid "$LAUNCHER")
    else
        epmd_start
    fi

    # Ready when `rabbitmqctl wait` returns (the pidfile exists and the app has booted). It runs in
    # the background so a node that dies early is noticed at once.
    timeout=${PUSH_RABBITMQ_START_TIMEOUT:-60}
    "$RMQ_BIN/rabbitmqctl" -q wait --timeout "$timeout" "$PIDFILE" </dev/null >>"$LOGDIR/ctl.log" 2>&1 9>&- &
    waiter=$!
    deadline=$(($(now_ms) + (timeout + 10) * 1000))
    while alive "$waiter"; do
        if [[ -n $launcher ]] && ! alive "$launcher" && [[ -z $(pid_of "$PIDFILE" "$DIR") ]]; then
            kill "$waiter" 2>/dev/null || true
            wait "$waiter" 2>/dev/null || true
            tail_logs "$LOGDIR/console.log" "$LOGDIR/rabbit.log"
            warn "$LABEL exited during start-up"
            do_stop >/dev/null 2>&1 || true
            exit 1
        fi
        if (($(now_ms) >= deadline)); then
            kill "$waiter" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rc=0
    wait "$waiter" || rc=$?
    if ((rc != 0)); then
        tail_logs "$LOGDIR/console.log" "$LOGDIR/rabbit.log" "$LOGDIR/ctl.log"
        warn "$LABEL did not come up within ${timeout}s (rabbitmqctl wait exited $rc); stopping it"
        do_stop >/dev/null 2>&1 || true
        exit 1
    fi
    # The TLS listener starts with the node; give it a moment all the same.
    if [[ -n $TLS_PORT ]]; then
        deadline=$(($(now_ms) + 10000))
        until port_open "$TLS_PORT"; do
            if (($(now_ms) >= deadline)); then
                tail_logs "$LOGDIR/rabbit.log"
                warn "$LABEL: the TLS port $TLS_PORT does not accept connections; stopping it"
                do_stop >/dev/null 2>&1 || true
                exit 1
            fi
            sleep 0.1
        done
    fi
    # The management plugin starts with the node too; its listener may lag a moment behind.
    if [[ -n $MGMT_PORT ]]; then
        deadline=$(($(now_ms) + 10000))
        until port_open "$MGMT_PORT"; do
            if (($(now_ms) >= deadline)); then
                tail_logs "$LOGDIR/rabbit.log"
                warn "$LABEL: the management port $MGMT_PORT does not accept connections; stopping it"
                do_stop >/dev/null 2>&1 || true
                exit 1
            fi
            sleep 0.1
        done
    fi
    [[ -n $JOIN_NODE ]] && join_cluster "$JOIN_NODE"
    apply_policies
    pid=$(read_pid "$PIDFILE")
    local tls=${TLS_PORT:+, TLS 127.0.0.1:$TLS_PORT}${MGMT_PORT:+, management 127.0.0.1:$MGMT_PORT}
    if [[ -n ${started:-} ]]; then
        info "started (pid $pid, 127.0.0.1:$PORT$tls, node $RABBITMQ_NODENAME, $(($(now_ms) - started)) ms)"
    else
        info "already running (pid $pid, 127.0.0.1:$PORT$tls)"
    fi
}

# join_cluster NODE: makes this node a member of NODE's cluster unless it is one already.
join_cluster() {
    local node=$1 members
    members=$(ctl -q cluster_status --formatter json 2>>"$LOGDIR/ctl.log") || die "$LABEL: rabbitmqctl cluster_status failed (see $LOGDIR/ctl.log)"
    if python3 -c 'import json,sys; sys.exit(0 if sys.argv[2] in json.loads(sys.argv[1]).get("disk_nodes", []) else 1)' "$members" "$node"; then
        return 0
    fi
    { ctl -q stop_app && ctl -q join_cluster "$node" && ctl -q start_app; } >>"$LOGDIR/ctl.log" 2>&1 ||
        die "$LABEL: could not join $node's cluster (see $LOGDIR/ctl.log)"
    ctl -q await_startup >>"$LOGDIR/ctl.log" 2>&1 || die "$LABEL: did not start again after joining $node (see $LOGDIR/ctl.log)"
    info "joined $node's cluster"
}

# kill: SIGKILL of the node and its wrapper, as a crash or an OOM kill would (data kept; `start`
# brings it back, and a cluster member rejoins by itself).
do_kill() {
    local pid launcher
    pid=$(pid_of "$PIDFILE" "$DIR")
    launcher=$(pid_of "$LAUNCHER" "$DIR")
    [[ -n $pid || -n $launcher ]] || { info "not running"; return 0; }
    [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
    [[ -n $launcher ]] && kill_session "$launcher"
    local i
    for ((i = 0; i < 100; i++)); do
        { [[ -z $pid ]] || ! alive "$pid"; } && { [[ -z $launcher ]] || ! alive "$launcher"; } && break
        sleep 0.05
    done
    rm -f "$PIDFILE" "$LAUNCHER"
    info "killed (pid ${pid:-none})"
}

# close-connections: the broker closes the matching client connections (see the usage above).
do_close_connections() {
    [[ -n $MATCHING ]] || die "close-connections needs --matching TEXT"
    local listing pids=() pid name port
    port=$(saved_port)
    node_env "${port:-$PORT}"
    # client_properties holds {"connection_name","NAME"}.
    listing=$(timeout 60 "$RMQ_BIN/rabbitmqctl" -q list_connections --no-table-headers pid client_properties </dev/null) ||
        die "rabbitmqctl list_connections failed"
    while IFS=$'\t' read -r pid name; do
        [[ $pid == "<"* && $name =~ \{\"connection_name\",\"([^\"]*)\"\} && ${BASH_REMATCH[1]} == *"$MATCHING"* ]] && pids+=("$pid")
    done <<<"$listing"
    for pid in "${pids[@]}"; do
        timeout 60 "$RMQ_BIN/rabbitmqctl" -q close_connection "$pid" "closed by scripts/rabbitmq.sh close-connections" </dev/null >/dev/null ||
            die "rabbitmqctl close_connection $pid failed"
    done
    say "${#pids[@]}"
}

if [[ ! -d $DIR ]]; then
    case $VERB in
        close-connections | ctl) die "not running" ;;
        kill) info "not running"; exit 0 ;;
        status) say "$LABEL: stopped"; exit 3 ;;
        stop) info "not running"; exit 0 ;;
    esac
fi
[[ $VERB == status || $VERB == close-connections ]] || lock_instance "$DIR"
case $VERB in
    close-connections) do_close_connections ;;
    kill) do_kill ;;
    ctl)
        port=$(saved_port)
        node_env "${port:-$PORT}"
        ctl "${CTL_ARGS[@]}"
        ;;
    start)
        # The distribution port (PORT+20000) can be held for up to a minute by a TIME_WAIT socket of
        # the previous node on it (a quick stop and start), or, for a PORT above 12767, by another
        # program's outgoing connection, since it then lies in Linux's ephemeral range (the ports of
        # the project's own instances all stay below it); the node then dies with
        # dist_port_already_used. One more try once no TIME_WAIT socket holds it (at most 65 s).
        if ! (do_start); then
            warn "$LABEL: start failed; trying once more when port $((PORT + 20000)) is free"
            for _ in $(seq 1 65); do
                command -v ss >/dev/null || { sleep 2; break; }
                [[ -z $(ss -Htan state time-wait "( sport = :$((PORT + 20000)) )" 2>/dev/null) ]] && break
                sleep 1
            done
            do_start
        fi
        ;;
    stop) do_stop ;;
    restart)
        [[ -n $TLS_PORT ]] || TLS_PORT=$(saved_port tls-port)
        [[ -n $MGMT_PORT ]] || MGMT_PORT=$(saved_port management-port)
        do_stop
        do_start
        ;;
    status)
        rc=0
        do_status || rc=$?
        exit "$rc"
        ;;
esac
