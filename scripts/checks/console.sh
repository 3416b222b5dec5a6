#!/usr/bin/env bash
# tier: check (the long tier: `make check`, which CI runs after `make test`; see scripts/run-checks.sh)
# push-console in a real browser: headless Chromium (Debian's chromium and chromium-driver) driven
# by Selenium through the console's pages on a private stack of --bin-dir's executables: login and
# logout, a server-localized push to a topic previewed (German and Chinese rows) and sent, its
# request page reaching `done` with what apns-sandbox received, a dead letter shown and replayed, a
# token looked up and deleted, the JSON API with a bearer key, every action audited and no secret
# logged. Ports 127.0.0.1:8980-8989 (RabbitMQ also derives 9980, 28980 and 29980-29990);
# tests/system/test_console.py says what each check compares with. Installs chromium,
# chromium-driver and a font with Chinese glyphs with apt first, and the pins of
# scripts/checks/console-requirements.txt into .local/venv-console. Logs, the operators file and a
# screenshot of every step: .local/console/. About 40 s once installed; bounded to 420 s.
#
#   scripts/checks/console.sh [--bin-dir DIR] [pytest arguments, e.g. -x]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PROG=console.sh
# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    apt_install chromium chromium-driver || true
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
        echo "$PROG: cannot install Debian's chromium and chromium-driver" >&2
        exit 3
    fi
fi
# A font with Chinese glyphs, so the screenshots of the zh-Hant payloads are readable (the checks
# read the DOM and pass without it).
if ! fc-list :lang=zh 2>/dev/null | grep -q .; then
    apt_install fonts-wqy-zenhei || echo "$PROG: could not install fonts-wqy-zenhei; Chinese shows as boxes in the screenshots" >&2
fi
exec bash "$ROOT/scripts/pytest.sh" console tests/system/test_console.py --timeout 420 \
    --requirements "$ROOT/scripts/checks/console-requirements.txt" "$@"
