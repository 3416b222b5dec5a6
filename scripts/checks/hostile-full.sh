#!/usr/bin/env bash
# tier: check
# The whole hostile-input catalogue (746 cases; `make test` runs a sample of it, hostile.sh). About
# 90 s on the private stack on 127.0.0.1:8800-8807.
#
#   scripts/checks/hostile-full.sh [--bin-dir DIR] [-k TEXT]
exec bash "$(dirname "${BASH_SOURCE[0]}")/hostile.sh" --full "$@"
