#!/usr/bin/env bash
# `make test-unit`: the Swift tests that need no server (no RabbitMQ, Redis, apns-sandbox or service
# process), in about 15 seconds once the tests are built; nothing is started. It builds every target,
# so it needs the -dev packages `make deps` installs (the Makefile target runs it first).
#
#   scripts/test-unit.sh [--list] [extra swift test arguments...]
#
# A test file is a unit test file when it names none of the helpers that start or reach a server
# (SERVER_HELPERS below); its suites are passed to `swift test --filter`. A unit test that starts
# needing a server fails here (connection refused), which says to name its helper below.
# --list prints the suites it would run, one `Module.Suite` a line, and exits.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Helpers whose use means a file's tests need servers: the shared ones in Tests/TestSupport and the
# fixtures of single test targets that wrap them.
SERVER_HELPERS='TestServers|SandboxProcess|ChildProcess|RunningServices|withSendService|ServiceFixture|PUSH_TEST_|withRegistry|withRedis|withBroker|withIngest|withConsole|withFeedback|withRender|IngestHTTPServerFixture|ExecutableTests|HTTPIngestHarness|withDevice\(|withApp\(|withAMQPConnection|LocalServer'

suites() {
    local file module
    while IFS= read -r file; do
        # The module is the first folder under Tests/ (Tests/PushCoreTests/Render/X.swift: PushCoreTests).
        module="${file#Tests/}"
        module="${module%%/*}"
        [[ $module == TestSupport ]] && continue
        grep -qE "$SERVER_HELPERS" "$file" && continue
        # Every type the file declares (struct, class, enum, extension): the suites among them are
        # what --filter matches (`Module.Suite/test()`); the others match nothing. A file that
        # declares none (only helpers) is no error.
        { grep -oE '^\s*(@Suite[^{]*\s)?(public\s+)?(final\s+)?(struct|class|enum|extension)\s+[A-Za-z_][A-Za-z0-9_]*' "$file" || true; } |
            awk '{print $NF}' | sed "s/^/$module./"
    done < <(find Tests -name '*.swift' | sort) | sort -u
}

if [[ ${1:-} == --list ]]; then
    suites
    exit 0
fi
command -v swift >/dev/null || { echo "test-unit.sh: swift is not on PATH" >&2; exit 1; }
mapfile -t names < <(suites)
((${#names[@]} > 0)) || { echo "test-unit.sh: found no unit test files" >&2; exit 1; }
pattern="$(printf '%s/|' "${names[@]}" | sed 's/\./\\./g; s/|$//')"
echo "test-unit.sh: ${#names[@]} types in files that need no server"
# Serially: some unit tests bound how long a wait may take, which two cores shared by a parallel
# run can break.
exec swift test --no-parallel --filter "^($pattern)" "$@"
