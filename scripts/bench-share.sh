#!/usr/bin/env bash
# Share groups against a consumer group on the same data: records/s and broker CPU per
# GB with 1, 4 and 16 share consumers and one consumer-group consumer, in one run
# (docs/benchmarks.md, "Share groups"). Builds the release broker and its plugins and
# runs tests/conformance/benches/ck_share.py with the test venv's confluent-kafka.
#   scripts/bench-share.sh [--messages N] [--size BYTES] [--rounds R] [--share K ...]
# BENCH_PROFILE=debug runs the debug build instead (to try the script, not for figures).
set -euo pipefail
exec "$(dirname "$0")/bench-release.sh" tests/conformance/benches/ck_share.py "$@"
