#!/usr/bin/env bash
# Runs the system checks of one tier (scripts/checks/*.sh, in name order), each given the debug
# executables' directory as --bin-dir, and says how long each took.
#
#   scripts/run-checks.sh --tier test|check [--bin-dir DIR] [--list]
#
# A check says its tier in a line `# tier: check` near its top: those are the long ones `make check`
# runs (an image build, a cluster, RabbitMQ 4, a browser, fuzzing, schemathesis). Every other check
# is in the `test` tier, which `make test` runs after the Swift tests. --list prints the tier's
# checks and exits. Exits non-zero when any check failed; every check runs either way.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

tier=""
bin_dir=""
list=0
while (($#)); do
    case $1 in
        --tier) tier="${2:-}"; shift 2 ;;
        --bin-dir) bin_dir="${2:-}"; shift 2 ;;
        --list) list=1; shift ;;
        -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "run-checks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $tier == test || $tier == check ]] || { echo "run-checks.sh: --tier must be test or check" >&2; exit 2; }

tier_of() {
    if head -n 30 "$1" | grep -qE '^# tier: check( |$)'; then echo check; else echo test; fi
}

checks=()
for check in scripts/checks/*.sh; do
    [[ -e $check && $(tier_of "$check") == "$tier" ]] && checks+=("$check")
done
if ((list)); then
    printf '%s\n' "${checks[@]}"
    exit 0
fi

if [[ -z $bin_dir ]]; then
    bin_dir="$(swift build --show-bin-path)"
fi
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
build_missing_products "$bin_dir"

status=0
summary=()
for check in "${checks[@]}"; do
    echo "run-checks.sh: check $check"
    started=$SECONDS
    if bash "$check" --bin-dir "$bin_dir"; then
        summary+=("$(printf '%-40s passed in %d s' "$check" $((SECONDS - started)))")
    else
        check_status=$?
        status=$check_status
        summary+=("$(printf '%-40s FAILED (exit %d) in %d s' "$check" "$check_status" $((SECONDS - started)))")
        echo "run-checks.sh: $check failed (exit $check_status)" >&2
    fi
done
echo "run-checks.sh: the $tier tier's checks"
printf '  %s\n' "${summary[@]}"
exit "$status"
