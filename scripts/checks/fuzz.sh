#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# The short fuzz run of `make check`: builds the fuzz targets (Fuzz/, a debug build with libFuzzer and
# AddressSanitizer in .build-fuzz-fuzzer-address/) and runs each for FUZZ_CHECK_SECONDS (default 10) from its committed seed corpus,
# which holds the inputs of every crash found so far. Prints the executions of each target; fails
# when one crashes, breaks an invariant, trips AddressSanitizer or runs no input. `make fuzz` is the long run (scripts/fuzz.sh).
#
#   scripts/checks/fuzz.sh [--bin-dir DIR]
#
# --bin-dir (given by run-tests.sh to every check) is accepted and ignored: the fuzz targets are a
# build of their own. Cost from a clean tree (measured on the 2-core development machine with the
# other core busy): 281 s building at one job (about 220 s of CPU), 105 s fuzzing; about 4 minutes
# in all where the build has both cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
while (($#)); do
    case $1 in
        --bin-dir) shift 2 ;;
        --bin-dir=*) shift ;;
        -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
# With AddressSanitizer (in .build-fuzz-fuzzer-address/): an out-of-bounds access or a use after free
# through the Swift code's unsafe pointers (the C libraries themselves are not instrumented) stops
# the target, which Swift's own checks would not see.
FUZZ_SANITIZERS="${FUZZ_SANITIZERS:-fuzzer,address}" exec bash "$ROOT/scripts/fuzz.sh" --seconds "${FUZZ_CHECK_SECONDS:-10}"
