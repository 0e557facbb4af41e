#!/usr/bin/env bash
# Memory a broker gives back after classic-group churn (docs/benchmarks.md,
# "Classic-group churn: memory given back"; issue 28 item 7). Starts a `drover serve`
# (debug by default; BROKER_PROFILE=release for the release build) and runs
# tests/conformance/benches/classic_churn_memory.py: M members in G classic groups
# joining, syncing, committing and leaving over raw Kafka frames for S seconds, then
# idle; prints the broker's memory before, right after and after the rest.
#   scripts/bench-classic-churn-memory.sh [--members 2000] [--groups 100] [--seconds 60]
#       [--rest-s 30] [--rounds 1] [--gdb-trim]
# --gdb-trim: also glibc's own account (held from the system, in use) through gdb, and
# what a malloc_trim(0) then still returns.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${BROKER_PROFILE:-debug}
flag=$([ "$profile" = release ] && echo --release || true)
scripts/install-test-deps.sh
cargo build -q $flag -p drover-host -p drover-coordinator -p drover-assignor-range \
  -p drover-offsets-embedded
# One connection per member: leave room for them.
ulimit -n 65536 2>/dev/null || true
exec target/test-venv/bin/python tests/conformance/benches/classic_churn_memory.py \
  --bin "target/$profile" "$@"
