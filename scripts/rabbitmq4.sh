#!/usr/bin/env bash
# A private RabbitMQ 4 node on 127.0.0.1 for the tests that must hold on RabbitMQ 4 as well as on
# Debian 12's RabbitMQ 3.10 (the delivery limit every quorum queue gets on 4.x). Debian 12 has no
# RabbitMQ 4 and no Erlang it runs on; Debian 13 (trixie) has rabbitmq-server 4.0.5 and Erlang 27.
# This downloads those packages (about 41 MB) from Debian's own mirror with a private apt
# configuration, unpacks them into the instance directory with dpkg -x (nothing is installed on
# the system, /etc/apt is not touched), points Erlang's programs at trixie's C library, OpenSSL and
# libstdc++ unpacked beside them (patchelf, from bookworm, also only unpacked), and starts the node.
#
#   scripts/rabbitmq4.sh start|stop|status [--port PORT]
#
# Instance directory: ${PUSH_LOCAL_DIR:-<package root>/.local}/rabbitmq4/ (root/ the unpacked
# packages, made once and reused; mnesia/, log/; env.sh). Defaults: --port 5699; epmd on PORT-1300,
# Erlang distribution PORT+20000, all on 127.0.0.1. User guest/guest. No policies are set: the
# tests check what the code does on a broker with RabbitMQ 4's defaults.
# `start` returns once the node answers (bounded by PUSH_RABBITMQ_START_TIMEOUT, default 90 s) and
# prints its version; `stop` stops the node and its epmd; `status` exits 0 when running, 3 when not.
set -euo pipefail

usage() { sed -n '2,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERB=${1:-}
[[ -n $VERB ]] && shift
PORT=5699
while (($#)); do
    case $1 in
        --port) PORT=${2:?--port needs a value}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 1400 && PORT < 45000)) || die "--port must be 1401-44999"
DIR="$PUSH_LOCAL_DIR/rabbitmq4"
ROOTFS="$DIR/root"
NODE="push-rmq4@localhost"
PACKAGES=(rabbitmq-server erlang-base erlang-asn1 erlang-crypto erlang-eldap erlang-inets erlang-mnesia erlang-os-mon
    erlang-parsetools erlang-public-key erlang-runtime-tools erlang-ssl erlang-syntax-tools erlang-tools erlang-xmerl
    libc6 libssl3t64 libstdc++6 libgcc-s1)

# unpack: the packages into $ROOTFS, once (a marker file says it is complete).
unpack() {
    [[ -f $ROOTFS/.complete ]] && return 0
    command -v dpkg >/dev/null && command -v apt-get >/dev/null || die "needs apt-get and dpkg (Debian)"
    [[ -r /usr/share/keyrings/debian-archive-keyring.gpg ]] || die "Debian's archive keyring is missing (package debian-archive-keyring)"
    rm -rf "$ROOTFS" "$DIR/apt" "$DIR/debs"
    mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/debs" "$ROOTFS"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main\n' >"$DIR/apt/sources.list"
    local apt=(apt-get -q -o Dir::Etc::sourcelist="$DIR/apt/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$DIR/apt/lists"
        -o Dir::Cache="$DIR/apt/cache")
    say "rabbitmq4.sh: downloading RabbitMQ 4 and Erlang from Debian trixie into $DIR (once)"
    local attempt
    for attempt in 1 2; do
        if "${apt[@]}" update >"$DIR/apt.log" 2>&1 && (cd "$DIR/debs" && "${apt[@]}" download "${PACKAGES[@]}" >>"$DIR/apt.log" 2>&1) &&
            (cd "$DIR/debs" && apt-get -q download patchelf >>"$DIR/apt.log" 2>&1); then
            break
        fi
        ((attempt == 2)) && die "downloading the packages failed (see $DIR/apt.log)"
        sleep 5
    done
    local deb
    for deb in "$DIR"/debs/*.deb; do dpkg -x "$deb" "$ROOTFS"; done
    local patchelf="$ROOTFS/usr/bin/patchelf" lib="$ROOTFS/usr/lib/x86_64-linux-gnu" file
    local loader="$lib/ld-linux-x86-64.so.2"
    [[ -x $patchelf && -e $loader ]] || die "the unpacked packages lack patchelf or the loader (see $DIR/apt.log)"
    # Erlang 27 from trixie needs glibc 2.38 (bookworm has 2.36) and OpenSSL 3.4: every ELF file of
    # the Erlang tree gets trixie's loader and library path.
    while IFS= read -r -d '' file; do
        head -c4 "$file" | grep -q ELF || continue
        if "$patchelf" --print-interpreter "$file" >/dev/null 2>&1; then
            "$patchelf" --set-interpreter "$loader" --force-rpath --set-rpath "$lib" "$file"
        else
            "$patchelf" --force-rpath --set-rpath "$lib" "$file"
        fi
    done < <(find "$ROOTFS/usr/lib/erlang" -type f -print0)
    local erts
    erts=$(basename "$(echo "$ROOTFS"/usr/lib/erlang/erts-*)")
    sed -i "s#ROOTDIR=/usr/lib/erlang#ROOTDIR=$ROOTFS/usr/lib/erlang#" "$ROOTFS/usr/lib/erlang/bin/erl" "$ROOTFS/usr/lib/erlang/$erts/bin/erl"
    rm -rf "$DIR/debs" "$DIR/apt/cache"
    touch "$ROOTFS/.complete"
}

environment() {
    local sbin
    sbin=$(echo "$ROOTFS"/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin)
    mkdir -p "$DIR/etc" "$DIR/home" "$DIR/mnesia" "$DIR/log"
    printf 'listeners.tcp.1 = 127.0.0.1:%s\nloopback_users = none\n' "$PORT" >"$DIR/etc/rabbitmq.conf"
    echo '[].' >"$DIR/etc/enabled_plugins"
    export HOME="$DIR/home" PATH="$ROOTFS/usr/lib/erlang/bin:$PATH"
    export ERL_EPMD_PORT=$((PORT - 1300)) ERL_EPMD_ADDRESS=127.0.0.1
    export RABBITMQ_CONFIG_FILE="$DIR/etc/rabbitmq.conf" RABBITMQ_CONF_ENV_FILE="$DIR/etc/rabbitmq-env.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/etc/enabled_plugins" RABBITMQ_NODENAME="$NODE"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$PORT" RABBITMQ_DIST_PORT=$((PORT + 20000))
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_MNESIA_BASE="$DIR/mnesia" RABBITMQ_LOG_BASE="$DIR/log" ERL_CRASH_DUMP="$DIR/log/erl_crash.dump"
    SBIN=$sbin
}

running() { timeout 10 "$SBIN/rabbitmq-diagnostics" -q -n "$NODE" check_port_connectivity >/dev/null 2>&1; }

case $VERB in
    start)
        unpack
        environment
        if running; then say "rabbitmq4.sh: running on 127.0.0.1:$PORT"; exit 0; fi
        spawn_detached "$DIR" "$DIR/server.pid" "$DIR/log/server.out" "$SBIN/rabbitmq-server"
        deadline=$((SECONDS + ${PUSH_RABBITMQ_START_TIMEOUT:-90}))
        while ((SECONDS < deadline)); do
            if running; then
                say "rabbitmq4.sh: RabbitMQ $(basename "$(dirname "$SBIN")" | sed 's/rabbitmq_server-//') on 127.0.0.1:$PORT"
                exit 0
            fi
            sleep 1
        done
        die "RabbitMQ 4 did not start within ${PUSH_RABBITMQ_START_TIMEOUT:-90} s (see $DIR/log)"
        ;;
    stop)
        [[ -f $ROOTFS/.complete ]] || exit 0
        environment
        timeout 60 "$SBIN/rabbitmqctl" -q -n "$NODE" stop >/dev/null 2>&1 || true
        pid=$(pid_of "$DIR/server.pid" "$DIR")
        [[ -z $pid ]] || terminate 20 "$pid" || true
        "$ROOTFS/usr/lib/erlang/bin/epmd" -port "$ERL_EPMD_PORT" -kill >/dev/null 2>&1 || true
        ;;
    status)
        [[ -f $ROOTFS/.complete ]] || exit 3
        environment
        running || exit 3
        ;;
    *) usage >&2; exit 2 ;;
esac
