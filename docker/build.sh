#!/usr/bin/env bash
# Build eos-harness/kafka:<KAFKA_VERSION> offline (see docker/README.md); extra arguments go to
# `python -m eos_harness.cluster.docker build` (--tag T, --rebuild-base). Starts Debian's dockerd for
# the build when no Docker engine runs, and stops it afterwards.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[[ -x "$python" ]] || python=python3
cd "$root"
exec "$python" -m eos_harness.cluster.docker build --start-dockerd "$@"
