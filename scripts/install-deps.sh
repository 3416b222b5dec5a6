#!/usr/bin/env bash
# Installs the Debian packages the project needs to build, test and run, if any is missing.
#
#   scripts/install-deps.sh [--bench]
#
# Build and test: librabbitmq-dev libhiredis-dev libnghttp2-dev libssl-dev pkg-config
#                 rabbitmq-server redis-server (redis-tools, erlang come with them) openssl (test TLS certificates), curl nghttp2-client (HTTP/2 clients for the apns-sandbox tests)
#                 python3-pika (the AMQP client of the chaos suite and the broadcast benchmark)
#                 python3-yaml python3-jsonschema (scripts/checks/compose.sh: docker-compose.yml against
#                 the compose schema)
# --bench also:   wrk
# Does nothing (and prints nothing) when everything is installed. Never leaves the distribution's
# RabbitMQ/Redis/epmd services running: the local scripts run their own instances.
set -euo pipefail

PROG=install-deps.sh
PACKAGES=(librabbitmq-dev libhiredis-dev libnghttp2-dev libssl-dev pkg-config rabbitmq-server redis-server redis-tools openssl curl nghttp2-client python3-pika python3-yaml python3-jsonschema)

for arg in "$@"; do
    case $arg in
        --bench) PACKAGES+=(wrk) ;;
        -h | --help)
            sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
            exit 0
            ;;
        *)
            echo "usage: $PROG [--bench]" >&2
            exit 2
            ;;
    esac
done

installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

missing=()
for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

command -v apt-get >/dev/null || {
    echo "$PROG: missing packages (${missing[*]}) and no apt-get; install them by hand" >&2
    exit 1
}
SUDO=()
if ((EUID != 0)); then
    command -v sudo >/dev/null || {
        echo "$PROG: missing packages (${missing[*]}); run as root or install sudo" >&2
        exit 1
    }
    SUDO=(sudo)
fi

echo "$PROG: installing ${missing[*]}"

# Without systemd, the packages' maintainer scripts would start the system RabbitMQ (5672),
# Redis (6379) and epmd (4369) through init.d. A policy-rc.d that denies every action prevents
# that; add one for the duration of the install unless the machine already has one.
POLICY=/usr/sbin/policy-rc.d
added_policy=""
if [[ ! -e $POLICY ]]; then
    printf '#!/bin/sh\n# added by install-deps.sh for the duration of an install\nexit 101\n' |
        "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    added_policy=1
fi
remove_policy() {
    [[ -n $added_policy ]] && "${SUDO[@]}" rm -f "$POLICY"
    added_policy=""
}
trap remove_policy EXIT

APT=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)
attempt() {
    "${APT[@]}" update &&
        "${APT[@]}" install -y --no-install-recommends "${missing[@]}"
}
# A concurrent `apt-get update` can delete downloaded packages mid-install: retry once.
if ! attempt; then
    echo "$PROG: apt-get failed; retrying once" >&2
    sleep 5
    if ! attempt; then
        echo "$PROG: could not install ${missing[*]} (apt-get failed twice; see above)" >&2
        exit 1
    fi
fi
remove_policy

# Belt and braces: stop whatever the install started as a system service (processes of the
# packages' system users), so nothing listens on 5672/6379/4369 behind the local scripts' backs.
stop_service() {
    local user=$1 service=$2 pids
    pids=$(pgrep -u "$user" 2>/dev/null || true)
    [[ -z $pids ]] && return 0
    echo "$PROG: stopping the $service system service the install started"
    if [[ -x /etc/init.d/$service ]]; then
        "${SUDO[@]}" /etc/init.d/"$service" stop >/dev/null 2>&1 || true
    fi
    sleep 1
    pids=$(pgrep -u "$user" 2>/dev/null || true)
    # shellcheck disable=SC2086 # one PID per word
    if [[ -n $pids ]]; then
        "${SUDO[@]}" kill -TERM $pids 2>/dev/null || true
    fi
}
for p in "${missing[@]}"; do
    case $p in
        rabbitmq-server)
            stop_service rabbitmq rabbitmq-server
            stop_service epmd epmd
            ;;
        redis-server) stop_service redis redis-server ;;
    esac
done

for p in "${missing[@]}"; do
    installed "$p" || {
        echo "$PROG: $p is still not installed" >&2
        exit 1
    }
done
echo "$PROG: done"
