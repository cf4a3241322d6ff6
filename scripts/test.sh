#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: unit, data-plane packet
# tests and emulation tests. Under CI (CI=true) an emulation test that cannot
# run fails instead of skipping; only the bmv2 cases skip where bmv2 is absent.
# The unit tests (pure code, no network) run first, in one process per core
# (pytest-xdist); the packet and emulation tests, which measure the host they
# run on, one at a time after them. Arguments go to both parts (-k, -x ...).
# The exit status is the first failing part's; 5 (no test collected) only if
# neither part collected one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test

unit_status=0
.venv/bin/python -m pytest tests/unit -q -rs --numprocesses=auto --durations=10 "$@" || unit_status=$?
host_status=0
.venv/bin/python -m pytest tests --ignore=tests/unit -q -rs --durations=20 "$@" || host_status=$?

if [ "$unit_status" -eq 5 ] && [ "$host_status" -eq 5 ]; then exit 5; fi
[ "$unit_status" -eq 5 ] && unit_status=0
[ "$host_status" -eq 5 ] && host_status=0
exit $(( unit_status != 0 ? unit_status : host_status ))
