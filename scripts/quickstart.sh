#!/usr/bin/env bash
# Set up (idempotent) and run the quickstart scenario; extra arguments go to `inatb run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/inatb run scenarios/quickstart.yaml "$@"
