#!/usr/bin/env bash
# `make clean-local`: stops every RabbitMQ and Redis instance under the local dir (by PID, with
# scripts/rabbitmq.sh and scripts/redis.sh) and removes the directory.
set -euo pipefail

SCRIPTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

rc=0
for d in "$PUSH_LOCAL_DIR"/rabbitmq-* "$PUSH_LOCAL_DIR"/redis-*; do
    [[ -d $d ]] || continue
    base=${d##*/}
    case $base in
        rabbitmq-*) kind=rabbitmq name=${base#rabbitmq-} ;;
        *) kind=redis name=${base#redis-} ;;
    esac
    PUSH_QUIET=1 bash "$SCRIPTS/$kind.sh" stop --name "$name" || rc=1
done
if ((rc != 0)); then
    die "some instances could not be stopped; $PUSH_LOCAL_DIR was kept"
fi
rm -rf "${PUSH_LOCAL_DIR:?}"
say "removed $PUSH_LOCAL_DIR"
