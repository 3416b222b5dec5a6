# shellcheck shell=bash
# apt_install PACKAGE...: installs Debian packages as scripts/install-deps.sh does (apt-get update
# first, a lock timeout, a retry once), as root or through sudo. Sourced by the checks that install
# their own tools; messages are prefixed with the caller's $PROG. Returns non-zero when it failed.
apt_install() {
    local sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null || { echo "$PROG: $* missing; run as root or install sudo" >&2; return 1; }
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null || { echo "$PROG: $* missing and no apt-get" >&2; return 1; }
    local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
    echo "$PROG: installing $*"
    if ! { "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "$@"; }; then
        echo "$PROG: apt-get failed; retrying once" >&2
        sleep 5
        "${apt[@]}" update && "${apt[@]}" install -y --no-install-recommends "$@"
    fi
}
