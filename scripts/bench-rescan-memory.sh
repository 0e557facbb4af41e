#!/usr/bin/env bash
# Resident memory a broker keeps per replaced plugin library (docs/benchmarks.md,
# "Plugin rescans: memory per replaced library"; issue 28 item 4). Builds N+1 genuinely
# rebuilt versions of the `load-aware` assignor (scripts/build-plugin-versions.sh), starts
# `drover serve` with the coordinator, range, embedded and the first of them, replaces it
# with each next version with a rescan after each, and prints the broker's memory every
# 5 versions (tests/conformance/benches/rescan_memory.py).
#   scripts/bench-rescan-memory.sh [N=30] [--load] [more rescan_memory.py options]
# --load: KIP-848 groups use the replaced assignor throughout, members churn and a
# producer writes. BROKER_PROFILE=release benches a release broker (default: debug).
set -euo pipefail
cd "$(dirname "$0")/.."
n=30
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  n=$1
  shift
fi
profile=${BROKER_PROFILE:-debug}
flag=$([ "$profile" = release ] && echo --release || true)
scripts/install-test-deps.sh
cargo build -q $flag -p drover-host -p drover-coordinator -p drover-assignor-range \
  -p drover-offsets-embedded
builds=$(scripts/build-plugin-versions.sh $((n + 1)))
exec target/test-venv/bin/python tests/conformance/benches/rescan_memory.py \
  --bin "target/$profile" --builds "$builds" --versions "$n" "$@"
