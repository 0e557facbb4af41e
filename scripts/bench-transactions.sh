#!/usr/bin/env bash
# Transactions per second and read_committed against read_uncommitted consume
# throughput (docs/benchmarks.md, "Transactions"). Builds the release broker and runs
# tests/conformance/benches/ck_transactions.py with the test venv's confluent-kafka.
#   scripts/bench-transactions.sh [--small N] [--large N] [--records N] [--rounds R]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo build -q --release -p drover-host
exec target/test-venv/bin/python tests/conformance/benches/ck_transactions.py \
  --broker-bin target/release/drover "$@"
