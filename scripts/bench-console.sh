#!/usr/bin/env bash
# The web console's cost: its page load times and the broker CPU it costs while the
# groups page polls, at 10,000 groups with committed offsets, against the same broker
# with no console open (docs/benchmarks.md, "The web console"). Builds the release
# broker and its plugins and runs tests/conformance/benches/console_cpu.py with the test
# venv (selenium, confluent-kafka) and Debian's chromium.
#   scripts/bench-console.sh [--groups N] [--rounds R] [--seconds S] [--loads L]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
PROFILE=${BENCH_PROFILE:-release}
if [[ $PROFILE == release ]]; then
  cargo build -q --release -p drover-host -p drover-coordinator -p drover-assignor-range \
    -p drover-offsets-embedded
else
  cargo build -q -p drover-host -p drover-coordinator -p drover-assignor-range \
    -p drover-offsets-embedded
  PROFILE=debug
fi
exec target/test-venv/bin/python tests/conformance/benches/console_cpu.py \
  --broker-bin "${CARGO_TARGET_DIR:-target}/$PROFILE/drover" \
  --plugins "${CARGO_TARGET_DIR:-target}/$PROFILE" "$@"
