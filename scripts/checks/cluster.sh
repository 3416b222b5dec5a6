#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# The services on a RabbitMQ cluster and a Redis Cluster, as `make check` runs it after the Swift
# tests: a 3-node RabbitMQ cluster (scripts/rabbitmq-cluster.sh) and 3 Redis masters with a replica
# each (scripts/redis-cluster.sh), apns-sandbox and the four services of --bin-dir given every broker
# in PUSH_AMQP_URL and the cluster's seeds in PUSH_REDIS_URL. 3,000 tokens registered through
# push.registrations, one {"all": true} push, and at 30% delivered (a) a kill -9 of the RabbitMQ node
# push-send uses, (b) a kill -9 of the Redis master of the app's registry (its replica takes over):
# 0 lost, duplicates within the bound of the chaos suite, every dead token removed, nothing left in
# a queue; at loopback speed and with answers after 150 ms. About 4 minutes; ports 127.0.0.1:8300-8366
# (tests/system/test_chaos.py, class ClusterStack), stopped afterwards, also on failure or Ctrl-C.
#
#   scripts/checks/cluster.sh --bin-dir DIR [--latency 0|150|both] [--tokens N]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
exec bash "$ROOT/scripts/chaos.sh" --cluster "$@"
