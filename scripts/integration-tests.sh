#!/usr/bin/env bash
# Real-client integration tests: starts `target/debug/drover serve` per test and drives
# it with kcat, confluent-kafka, kafka-python and kafkajs (tests/integration). Installs what
# they need first (scripts/install-test-deps.sh). Extra arguments go to pytest, e.g.
#   scripts/integration-tests.sh -k durability -x
# DROVER_BIN overrides the broker binary; DROVER_TEST_RUST_LOG its log level (info).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-test-deps.sh
echo "== cargo build: the broker and the plugin libraries the tests install"
cargo build -q -p drover-host -p drover-coordinator -p drover-assignor-range -p drover-assignor-round-robin -p drover-assignor-sticky -p drover-assignor-load-aware -p drover-offsets-embedded -p drover-offsets-zookeeper -p drover-offsets-postgres -p drover-fixture-lopsided-v1 -p drover-fixture-lopsided-v2 -p drover-fixture-recording-assignor -p drover-fixture-slow-assignor -p drover-fixture-stuck-assignor -p drover-example-weighted-assignor
echo "== pytest tests/integration"
exec target/test-venv/bin/python -m pytest -q tests/integration "$@"
