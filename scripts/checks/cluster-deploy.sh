#!/usr/bin/env bash
# The cluster deployments (docker-compose.cluster.yml over docker-compose.yml, and
# deploy/kubernetes/cluster/), checked without a container engine or a Kubernetes cluster: see
# scripts/checks/cluster_deploy.py for every check. A few seconds; prints `cluster-deploy: N passed,
# N failed` and exits non-zero on any failure.
#
#   scripts/checks/cluster-deploy.sh [--bin-dir DIR]   (--bin-dir is accepted and ignored)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,7s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
exec "$PY" "$ROOT/scripts/checks/cluster_deploy.py"
