#!/usr/bin/env bash
# The hostile-input catalogue (tests/system/test_hostile.py): extreme and malformed messages to
# every queue and push-ingest's HTTP API through a real AMQP client against the running binaries of
# --bin-dir; every service stays up with its PID, every invalid message ends in push.dead with a
# reason that starts with the field, every HTTP refusal is a 4xx naming the field, every ok case
# shows its effect, nothing is left in a queue, and a good registration, push and feedback event
# afterwards arrive. `make test` runs this sample (the first and every 8th case of each target,
# phase and expectation: about 110 of 746); --full runs them all (hostile-full.sh in `make check`,
# `make hostile` with release builds). A private stack on 127.0.0.1:8800-8807.
#
#   scripts/checks/hostile.sh [--bin-dir DIR] [--full] [-k TEXT] [--collect-only -q]
exec bash "$(dirname "${BASH_SOURCE[0]}")/../pytest.sh" hostile tests/system/test_hostile.py "$@"
