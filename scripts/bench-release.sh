#!/usr/bin/env bash
# Shared by scripts/bench-share.sh and scripts/bench-console.sh: builds the broker, the
# coordinator plugin, `range` and the embedded store (release; BENCH_PROFILE=debug for
# the debug build, to try a bench, not for figures) and runs the Python bench BENCH
# (a path under tests/conformance/benches) with the test venv, passing --broker-bin,
# --plugins and the remaining arguments.
#   scripts/bench-release.sh BENCH [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
bench=$1; shift
scripts/install-test-deps.sh
PROFILE=${BENCH_PROFILE:-release}
crates=(-p drover-host -p drover-coordinator -p drover-assignor-range -p drover-offsets-embedded)
if [[ $PROFILE == release ]]; then
  cargo build -q --release "${crates[@]}"
else
  cargo build -q "${crates[@]}"
  PROFILE=debug
fi
exec target/test-venv/bin/python "$bench" \
  --broker-bin "${CARGO_TARGET_DIR:-target}/$PROFILE/drover" \
  --plugins "${CARGO_TARGET_DIR:-target}/$PROFILE" "$@"
