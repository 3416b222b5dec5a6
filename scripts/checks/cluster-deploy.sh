#!/usr/bin/env bash
# The cluster deployments (docker-compose.cluster.yml over docker-compose.yml, and
# deploy/kubernetes/cluster/), checked without a container engine or a Kubernetes cluster:
# tests/system/test_cluster_deploy.py says every check. No stack, no ports; a few seconds.
#
#   scripts/checks/cluster-deploy.sh [--bin-dir DIR] [pytest arguments]   (--bin-dir is not used)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec bash "$ROOT/scripts/pytest.sh" cluster-deploy tests/system/test_cluster_deploy.py "$@"
