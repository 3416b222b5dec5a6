#!/usr/bin/env bash
# apns-sandbox against clients nobody here wrote (tests/system/test_fidelity.py): aioapns (PyPI) with
# token and certificate auth, nghttp and h2load (Debian's nghttp2-client), each answered as Apple
# answers. The sandbox alone on 127.0.0.1:8840 (admin 8841). Installs nghttp2-client with apt and the
# pins of fidelity-requirements.txt into .local/venv-fidelity. A few seconds once installed.
#
#   scripts/checks/fidelity.sh [--bin-dir DIR] [pytest arguments, e.g. -k nghttp]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=fidelity.sh
if ! command -v nghttp >/dev/null || ! command -v h2load >/dev/null; then
    # shellcheck source=scripts/apt.sh
    . "$ROOT/scripts/apt.sh"
    apt_install nghttp2-client || { echo "$PROG: cannot install nghttp2-client" >&2; exit 3; }
fi
exec bash "$ROOT/scripts/pytest.sh" fidelity tests/system/test_fidelity.py --timeout 110 \
    --requirements "$ROOT/scripts/checks/fidelity-requirements.txt" "$@"
