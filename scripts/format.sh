#!/usr/bin/env bash
# Formats the Swift sources with the toolchain's swift-format and the package's .swift-format, or
# with --check reports what is not formatted (exit 1) without changing anything.
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(Sources Tests Benchmarks Package.swift Fuzz/Sources Fuzz/Package.swift)
if [[ ${1:-} == --check ]]; then
    findings="$(swift format lint --strict --recursive --parallel "${paths[@]}" 2>&1 || true)"
    if [[ -n $findings ]]; then
        printf '%s\n' "$findings" | head -40 >&2
        echo "format.sh: $(printf '%s\n' "$findings" | grep -c 'warning\|error') finding(s); run \`make format\`" >&2
        exit 1
    fi
    echo "format.sh: formatted"
else
    swift format format --in-place --recursive --parallel "${paths[@]}"
fi
