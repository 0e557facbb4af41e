#!/usr/bin/env bash
# Runs every test, installing what the tests need first. Called by .ci/run.
# Needs: a Rust toolchain (cargo, rustfmt, clippy) and python3. The real-client
# integration tests install their own clients (kcat and Node.js from apt; confluent-kafka
# and kafka-python into target/test-venv; kafkajs into target/test-node) and start their
# own brokers.
set -euo pipefail
cd "$(dirname "$0")/.."

# Free disk before each stage: a linker that runs out of disk dies with SIGBUS, and the
# reading says why.
disk() { echo "   (disk: $(df -h --output=avail . | tail -n 1 | tr -d ' ') free)"; }

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
disk
cargo clippy --workspace --all-targets -- -D warnings
scripts/install-test-deps.sh  # Debian packages the tests need (PostgreSQL, ZooKeeper, ...)
echo "== cargo test"
disk
cargo test --workspace
echo "== fuzz smoke run"
disk
scripts/fuzz-smoke.sh
echo "== real-client integration tests"
disk
scripts/integration-tests.sh
