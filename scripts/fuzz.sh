#!/usr/bin/env bash
# Builds the fuzz targets (Fuzz/Package.swift) with libFuzzer and runs each for a set time, starting
# from its committed seed corpus (Fuzz/Corpus/<target>/). `make fuzz` runs every target for
# FUZZ_SECONDS (default 60); `make check` runs scripts/checks/fuzz.sh, a short run of each.
#
#   scripts/fuzz.sh [--seconds N] [--build-only] [--list] [TARGET ...]
#
# TARGET is a name from --list (`fuzz-push-request`, or just `push-request`); default: all.
# Prints one line per target: executions, executions per second, coverage, crash or not; exits 1
# if any target crashed (or broke an invariant) or ran no input at all, 2 on a build failure.
#
# Nothing is written into the tree: the build goes to .build-fuzz/ (.build-fuzz-<sanitizers>/ for other
# FUZZ_SANITIZERS), and under .local/fuzz/<target>/
# go the inputs the run found interesting (corpus/, reused by the next run), crash inputs
# (crash-<sha1>, timeout-…, oom-…) and the run's log (fuzz.log). Replay a crash with
#   .build-fuzz/debug/fuzz-<target> .local/fuzz/<target>/crash-…
# (FUZZ_EXPLAIN=1 prints what the target made of each input); a fixed crash becomes a Swift test
# and its input a `crash-*` file in Fuzz/Corpus/<target>/.
#
# Environment:
#   FUZZ_SECONDS     seconds per target (default 60; --seconds wins)
#   FUZZ_CONFIG      debug (default: Swift's bounds and overflow checks on, the cheaper build) or
#                    release
#   FUZZ_SANITIZERS  -sanitize= value (default fuzzer; fuzzer,address adds AddressSanitizer)
#   FUZZ_JOBS        build jobs (default: swift build's, one per core)
#   FUZZ_MAX_LEN     longest input libFuzzer makes (default: the largest seed, at least 4096
#                    bytes; 32768 for fuzz-amqp-headers)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

TARGETS=(
    fuzz-push-request
    fuzz-send-batch
    fuzz-registration
    fuzz-invalid-token-report
    fuzz-legacy-forms
    fuzz-legacy-feedback
    fuzz-apps-file
    fuzz-strings-catalog
    fuzz-amqp-headers
    fuzz-apns-response
)

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

seconds=${FUZZ_SECONDS:-60}
build_only=0
selected=()
while (($#)); do
    case $1 in
        --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
        --seconds=*) seconds=${1#*=}; shift ;;
        --build-only) build_only=1; shift ;;
        --list) printf '%s\n' "${TARGETS[@]}"; exit 0 ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *)
            name=$1
            [[ $name == fuzz-* ]] || name="fuzz-$name"
            [[ " ${TARGETS[*]} " == *" $name "* ]] || { echo "fuzz.sh: no target $1 (see --list)" >&2; exit 2; }
            selected+=("$name")
            shift
            ;;
    esac
done
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: --seconds must be a whole number > 0" >&2; exit 2; }
((${#selected[@]})) || selected=("${TARGETS[@]}")

config=${FUZZ_CONFIG:-debug}
sanitizers=${FUZZ_SANITIZERS:-fuzzer}
# One scratch directory per sanitizer set: switching between `make fuzz` and `make check` (which adds
# AddressSanitizer) then rebuilds nothing.
scratch=.build-fuzz
[[ $sanitizers == fuzzer ]] || scratch=".build-fuzz-${sanitizers//,/-}"
build=(swift build -c "$config" --package-path Fuzz --scratch-path "$scratch"
    -Xswiftc "-sanitize=$sanitizers" -Xswiftc -enable-testing)
[[ -n ${FUZZ_JOBS:-} ]] && build+=(-j "$FUZZ_JOBS")

mkdir -p .local/fuzz
build_log=.local/fuzz/build.log
echo "fuzz.sh: building (${build[*]}; log: $build_log)"
build_started=$SECONDS
: >"$build_log"
if ((${#selected[@]} == ${#TARGETS[@]})); then
    products=("")
else
    products=("${selected[@]}")
fi
for product in "${products[@]}"; do
    status=0
    "${build[@]}" ${product:+--product "$product"} >>"$build_log" 2>&1 || status=$?
    if ((status != 0)); then
        grep -E 'error:' "$build_log" | head -20 >&2 || tail -20 "$build_log" >&2
        echo "fuzz.sh: the build failed (exit $status); see $build_log" >&2
        exit 2
    fi
done
bin_dir="$scratch/$config"
echo "fuzz.sh: built in $((SECONDS - build_started)) s"
((build_only)) && exit 0

# libFuzzer handles crashes itself (it saves the input); Swift's backtracer would get there first.
export SWIFT_BACKTRACE=enable=no
crashed=0
total_executions=0
printf 'fuzz.sh: %s s per target\n' "$seconds"
for target in "${selected[@]}"; do
    work=".local/fuzz/$target"
    mkdir -p "$work/corpus"
    log="$work/fuzz.log"
    flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/")
    # libFuzzer's own choice (the largest seed, at least 4096 bytes), but AMQP content headers get
    # room to nest deep: a frame holds 128 KB.
    max_len=${FUZZ_MAX_LEN:-}
    [[ -z $max_len && $target == fuzz-amqp-headers ]] && max_len=32768
    [[ -n $max_len ]] && flags+=(-max_len="$max_len")
    [[ -f Fuzz/Dictionaries/$target.dict ]] && flags+=(-dict="Fuzz/Dictionaries/$target.dict")
    # The run's own corpus first: libFuzzer writes new inputs only into the first directory, so the
    # committed seeds stay as they are.
    run_status=0
    "$bin_dir/$target" "${flags[@]}" "$work/corpus" "Fuzz/Corpus/$target" >"$log" 2>&1 || run_status=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    executions=${executions:-0}
    total_executions=$((total_executions + executions))
    line=$(printf '%-27s %10s executions in %s s (%s/s), coverage %s' "$target" "$executions" "$seconds" \
        "$((executions / seconds))" "${coverage:-?}")
    if ((run_status == 0 && executions == 0)); then
        # A target that ran nothing (a broken build, a corpus it cannot read) proves nothing.
        crashed=$((crashed + 1))
        echo "$line: RAN NOTHING (see $log)"
    elif ((run_status != 0)); then
        crashed=$((crashed + 1))
        artefact=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log" | tail -1)
        echo "$line: CRASHED (exit $run_status)"
        grep -m3 -E 'Fatal error|invariant violated|ERROR: libFuzzer|ERROR: AddressSanitizer|SUMMARY' "$log" | sed 's/^/    /' || true
        echo "    input: ${artefact:-see $log}; log: $log"
    else
        echo "$line: ok"
    fi
done
echo "fuzz.sh: ${#selected[@]} targets, $total_executions executions, $crashed crashed or ran nothing"
((crashed == 0))
