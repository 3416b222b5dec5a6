#!/usr/bin/env bash
# The security features against a live private stack, as `make test` runs it after the Swift tests:
# the console's roles (scoped API keys, 403 naming the scope, the audit log), sessions Redis cannot
# forge, logins under a flood from one address, bounded state in push-ingest (max_activity_slots,
# new_tokens_per_minute), a legacy credential that survives a 429, slow request heads cut off,
# control characters refused, bundle ids that cannot be probed, and push-send reaching apns-sandbox
# through an authenticated HTTP CONNECT proxy without logging its password. Ports 127.0.0.1:8600-8609;
# tests/system/test_security.py says what each check compares with. About 30 s.
#
#   scripts/checks/security.sh [--bin-dir DIR] [pytest arguments, e.g. -k sessions]
exec bash "$(dirname "${BASH_SOURCE[0]}")/../pytest.sh" security tests/system/test_security.py "$@"
