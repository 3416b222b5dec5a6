#!/usr/bin/env bash
# docker-compose.yml delivers, checked without a container engine (tests/system/test_compose.py says
# what each check compares with): the file against the compose schema and the project's rules
# (`-k static` runs these alone), then its services started as compose would start them, from the
# --bin-dir executables, in a private network and mount namespace (unshare) on compose's own ports
# (RabbitMQ 5672/15672, Redis 6379, apns-sandbox 2197/2198, the services 8080/9090, push-console
# 8090), none of them the host's. About 25 s.
#
#   scripts/checks/compose.sh [--bin-dir DIR] [pytest arguments, e.g. -k static]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
case " $* " in *" -h "* | *" --help "*) sed -n '1,/^"""$/{s/"""//;p;}' "$ROOT/tests/system/test_compose.py"; exit 0 ;; esac
exec bash "$ROOT/scripts/pytest.sh" compose tests/system/test_compose.py "$@"
