#!/usr/bin/env bash
# A short fuzzing run of every decoder target (fuzz/README.md), as part of the test
# command: SECONDS_PER_TARGET each (default 10, what CI runs; fuzz longer on demand,
# e.g. `FUZZ_RELEASE=1 SECONDS_PER_TARGET=300 scripts/fuzz-smoke.sh`). Installs
# cargo-fuzz when missing.
#   scripts/fuzz-smoke.sh            install, build every target, run each
#   scripts/fuzz-smoke.sh --build    install and build only (scripts/test.sh does this
#                                    in the background while the tests run)
#   scripts/fuzz-smoke.sh --run      run each target (built already)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${SECONDS_PER_TARGET:-10}"
# The smoke run builds the targets unoptimised (`cargo fuzz build --dev`: the sanitizer
# and debug assertions stay, the build of the crates under test (not the broker host:
# fuzz/Cargo.toml) takes a fraction of the optimised one's time, and a 10 s run still
# executes tens of thousands of inputs per target); FUZZ_RELEASE=1 builds them
# optimised, for long runs.
profile=(--dev)
if [[ "${FUZZ_RELEASE:-0}" == 1 ]]; then profile=(); fi
build=1
run=1
case "${1:-}" in
  --build) run=0 ;;
  --run) build=0 ;;
  "") ;;
  *) echo "usage: $0 [--build|--run]" >&2; exit 2 ;;
esac
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz 0.13.2"
  cargo install cargo-fuzz --version 0.13.2 --locked --quiet
fi
cd fuzz
# Build every target first, apart from running them: a build that fails (the linker
# killed, say) is not a finding, and is tried once more after the disk reading.
# RUSTC_BOOTSTRAP lets the stable toolchain take cargo fuzz's sanitizer flags.
if ((build)); then
  t0=$SECONDS
  if ! RUSTC_BOOTSTRAP=1 cargo fuzz build "${profile[@]}"; then
    echo "building the fuzz targets failed; disk: $(df -h --output=avail . | tail -n 1) free; trying once more"
    RUSTC_BOOTSTRAP=1 cargo fuzz build "${profile[@]}"
  fi
  echo "== fuzz targets built in $((SECONDS - t0)) s"
fi
if ((!run)); then
  exit 0
fi
for target in $(cargo fuzz list); do
  echo "== fuzz $target for ${seconds}s"
  log="$(mktemp)"
  if ! RUSTC_BOOTSTRAP=1 cargo fuzz run "${profile[@]}" "$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $target failed; the input is under fuzz/artifacts/$target/"
    exit 1
  fi
  grep -E "^Done" "$log" || tail -n 3 "$log"
  rm -f "$log"
done
