#!/usr/bin/env bash
# The shared RabbitMQ and Redis the test suite uses (Tests/TestSupport/TestServers.swift).
#
#   scripts/test-servers.sh start|stop|status|env
#
# start  stops instances earlier test runs left behind (names ending in -test), starts RabbitMQ
#        `test` on 127.0.0.1:5712 (AMQPS on 127.0.0.1:5711, client certificate required,
#        certificates in its tls/) and Redis `test` on 127.0.0.1:6419 with empty data (unless
#        they are already running, or PUSH_TEST_KEEP_DATA=1).
# stop   stops both and every other instance named *-test under the local dir (the private
#        servers of restart tests), so nothing is left running. Logs are kept until the next start.
# status shows them; env prints the `export PUSH_TEST_AMQP_URL=… PUSH_TEST_AMQPS_URL=…
#        PUSH_TEST_TLS_DIR=… PUSH_TEST_REDIS_URL=…` lines.
# Environment: PUSH_LOCAL_DIR, PUSH_TEST_AMQP_PORT (5712), PUSH_TEST_AMQPS_PORT (5711),
# PUSH_TEST_REDIS_PORT (6419).
set -euo pipefail

usage() {
    sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

AMQP_PORT="${PUSH_TEST_AMQP_PORT:-5712}"
AMQPS_PORT="${PUSH_TEST_AMQPS_PORT:-5711}"
REDIS_PORT="${PUSH_TEST_REDIS_PORT:-6419}"

# The shared RabbitMQ's certificates (scripts/rabbitmq.sh --tls-port).
TLS_DIR="$PUSH_LOCAL_DIR/rabbitmq-test/tls"

# url_encode STRING: STRING with every byte but [A-Za-z0-9/._~-] percent-encoded (for a path in a
# URL query).
url_encode() {
    local LC_ALL=C s=$1 i c out=""
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
            [A-Za-z0-9/._~-]) out+=$c ;;
            *) out+=$(printf '%%%02X' "'$c") ;;
        esac
    done
    printf '%s\n' "$out"
}

# leftovers: "kind name" for every *-test instance directory except the shared ones.
leftovers() {
    local d base
    for d in "$PUSH_LOCAL_DIR"/rabbitmq-*-test "$PUSH_LOCAL_DIR"/redis-*-test; do
        [[ -d $d ]] || continue
        base=${d##*/}
        case $base in
            rabbitmq-cluster-*) printf 'rabbitmq-cluster %s\n' "${base#rabbitmq-cluster-}" ;;
            redis-cluster-*) printf 'redis-cluster %s\n' "${base#redis-cluster-}" ;;
            rabbitmq-*) printf 'rabbitmq %s\n' "${base#rabbitmq-}" ;;
            redis-*) printf 'redis %s\n' "${base#redis-}" ;;
        esac
    done
}

stop_all() {
    local rc=0 kind name
    bash "$SCRIPTS/rabbitmq.sh" stop --name test || rc=1
    bash "$SCRIPTS/redis.sh" stop --name test || rc=1
    while read -r kind name; do
        [[ -n $kind ]] || continue
        bash "$SCRIPTS/$kind.sh" stop --name "$name" || rc=1
    done < <(leftovers)
    return "$rc"
}

# fresh KIND: removes the data of the shared instance of KIND if it is not running.
fresh() {
    [[ ${PUSH_TEST_KEEP_DATA:-} == 1 ]] && return 0
    if ! bash "$SCRIPTS/$1.sh" status --name test >/dev/null 2>&1; then
        rm -rf "${PUSH_LOCAL_DIR:?}/$1-test"
    fi
}

case ${1:-} in
    start)
        # Leftovers of an interrupted run: stop them and drop their data.
        while read -r kind name; do
            [[ -n $kind ]] || continue
            PUSH_QUIET=1 bash "$SCRIPTS/$kind.sh" stop --name "$name"
            rm -rf "${PUSH_LOCAL_DIR:?}/$kind-$name"
            # A cluster's nodes live beside it, in <kind>-NAME-<n>.
            [[ $kind == *-cluster ]] && rm -rf "${PUSH_LOCAL_DIR:?}/${kind%-cluster}-$name-"[0-9]
        done < <(leftovers)
        fresh rabbitmq
        fresh redis
        if ! bash "$SCRIPTS/redis.sh" start --name test --port "$REDIS_PORT" ||
            ! bash "$SCRIPTS/rabbitmq.sh" start --name test --port "$AMQP_PORT" --tls-port "$AMQPS_PORT"; then
            stop_all >/dev/null 2>&1 || true
            die "could not start the test servers"
        fi
        ;;
    stop) stop_all ;;
    status)
        rc=0
        bash "$SCRIPTS/rabbitmq.sh" status --name test || rc=$?
        bash "$SCRIPTS/redis.sh" status --name test || rc=$?
        exit "$rc"
        ;;
    env)
        printf 'export PUSH_TEST_AMQP_URL=%q\n' "amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"
        # `localhost`: the server certificate names no IP address; the client certificate: the
        # listener requires one (see scripts/rabbitmq.sh).
        printf 'export PUSH_TEST_AMQPS_URL=%q\n' \
            "amqps://guest:guest@localhost:$AMQPS_PORT/%2f?cacertfile=$(url_encode "$TLS_DIR/ca.pem")&certfile=$(url_encode "$TLS_DIR/client.pem")&keyfile=$(url_encode "$TLS_DIR/client.key")"
        printf 'export PUSH_TEST_TLS_DIR=%q\n' "$TLS_DIR"
        printf 'export PUSH_TEST_REDIS_URL=%q\n' "redis://127.0.0.1:$REDIS_PORT/0"
        ;;
    -h | --help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
esac
