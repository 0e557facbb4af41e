#!/usr/bin/env bash
# Runs every test, installing what the tests need first. Called by .ci/run.
# Needs: a Rust toolchain (cargo, rustfmt, clippy) and python3. The real-client
# integration tests install their own clients (kcat and Node.js from apt; confluent-kafka
# and kafka-python into target/test-venv; kafkajs into target/test-node) and start their
# own brokers.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
scripts/install-test-deps.sh  # Debian packages the tests need (PostgreSQL, ZooKeeper, ...)
echo "== cargo test"
cargo test --workspace
echo "== fuzz smoke run"
scripts/fuzz-smoke.sh
echo "== real-client integration tests"
scripts/integration-tests.sh
