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

# pinned_venv DIR REQUIREMENTS [MODULE...]: a virtualenv at DIR holding exactly the pinned set of
# REQUIREMENTS (pip, a retry once), reused while a copy of the pins in it matches and MODULEs
# import; python3-venv comes with apt when missing. Returns non-zero when it cannot be made.
pinned_venv() {
    local venv=$1 requirements=$2 py=/usr/bin/python3 imports
    shift 2
    imports="import ${*:-sys}"
    imports=${imports// /, }
    imports=${imports/import,/import}
    [[ -x $py ]] || py=$(command -v python3) || { echo "$PROG: python3 is missing" >&2; return 1; }
    if cmp -s "$requirements" "$venv/.requirements" 2>/dev/null && "$venv/bin/python" -c "$imports" 2>/dev/null; then
        return 0
    fi
    "$py" -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv || return 1
    echo "$PROG: installing $requirements into $venv"
    rm -rf "$venv"
    "$py" -m venv "$venv" || return 1
    local pip=("$venv/bin/pip" install --quiet --disable-pip-version-check --timeout 60 -r "$requirements")
    if ! "${pip[@]}"; then
        echo "$PROG: pip failed; retrying once" >&2
        sleep 5
        "${pip[@]}" || { rm -rf "$venv"; echo "$PROG: cannot install $requirements from PyPI" >&2; return 1; }
    fi
    "$venv/bin/python" -c "$imports" || { rm -rf "$venv"; echo "$PROG: the packages of $requirements do not import" >&2; return 1; }
    cp "$requirements" "$venv/.requirements"
}
