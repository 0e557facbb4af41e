#!/usr/bin/env bash
# SASL_SSL against PLAINTEXT, broker CPU per GB produced and consumed, and connection
# set-up cost (TLS + SCRAM handshakes per broker CPU second) in the same run
# (docs/benchmarks.md, "SASL_SSL and PLAINTEXT"). Builds the release broker and runs
# tests/conformance/benches/ck_sasl.py with the test venv's confluent-kafka.
#   scripts/bench-sasl.sh [--messages N] [--size BYTES] [--partitions P] [--rounds R]
#                         [--handshakes N] [--clients C]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo build -q --release -p drover-host
exec target/test-venv/bin/python tests/conformance/benches/ck_sasl.py \
  --broker-bin target/release/drover "$@"
