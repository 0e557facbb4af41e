#!/usr/bin/env bash
# The `acl` authorizer against none: broker CPU per GB produced and consumed, two
# brokers of the same release build in one run (docs/benchmarks.md, "Authorization").
# Builds the release broker and the acl plugin and runs
# tests/conformance/benches/ck_authz.py with the test venv's confluent-kafka.
#   scripts/bench-authz.sh [--messages N] [--size BYTES] [--partitions P] [--rounds R]
#                          [--acls N]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo build -q --release -p drover-host -p drover-plugin-authorizer-acl
exec target/test-venv/bin/python tests/conformance/benches/ck_authz.py \
  --broker-bin target/release/drover \
  --acl-plugin target/release/libdrover_authorizer_acl.so "$@"
