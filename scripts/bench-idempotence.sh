#!/usr/bin/env bash
# Idempotent against plain produce, broker CPU per GB and throughput
# (docs/benchmarks.md, "Idempotent producers"). Builds the release broker and runs
# tests/conformance/benches/ck_idempotence.py with the test venv's confluent-kafka.
#   scripts/bench-idempotence.sh [--messages N] [--size BYTES] [--partitions P] [--rounds R]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo build -q --release -p drover-host
exec target/test-venv/bin/python tests/conformance/benches/ck_idempotence.py \
  --broker-bin target/release/drover "$@"
