#!/usr/bin/env bash
# Runs every test, installing what the tests need first. Called by .ci/run.
#
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   the inner loop: fmt, clippy, unit tests and one smoke
#                             integration test per API family and client
#                             (tests/integration, marker `smoke`)
#
# Needs: a Rust toolchain (cargo, rustfmt, clippy) and python3. The real-client
# integration tests install their own clients (kcat and Node.js from apt; confluent-kafka
# and kafka-python into target/test-venv; kafkajs into target/test-node) and start their
# own brokers.
#
# Each stage prints its wall time ("== <stage>: N s"), and a summary at the end (also in
# target/ci-timings.txt). Reports that say where the time went, under target/:
#   cargo-timings/          `cargo build --timings` of the build stages (HTML)
#   clippy/cargo-timings/   the same for clippy (its own target dir, see below)
#   ci-logs/                logs of the jobs that run in the background, pytest's log
#   pytest-durations.txt    the 30 slowest integration tests (`pytest --durations=30`)
#   pytest-report.xml       every integration test's time (JUnit XML)
#
# Knobs: PYTEST_WORKERS (integration test processes, default 4: the tests mostly wait
# on timers and brokers, not on the CPU; see scripts/integration-tests.sh),
# SECONDS_PER_TARGET (fuzzing time per target, default 10; scripts/fuzz-smoke.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

mkdir -p target/ci-logs
timings=target/ci-timings.txt
: >"$timings"
run_start=$SECONDS
stage_lines=()

summary() {
  {
    echo "== stage times (wall, seconds)"
    for l in "${stage_lines[@]}"; do echo "   $l"; done
    echo "   total: $((SECONDS - run_start)) s"
  } | tee "$timings"
}

# Free disk before each stage: a linker that runs out of disk dies with SIGBUS, and the
# reading says why.
disk() { echo "   (disk: $(df -h --output=avail . | tail -n 1 | tr -d ' ') free)"; }

# The machine's CPU ticks since boot, "busy idle" (all CPUs; /proc/stat's first line,
# iowait counted as idle): a stage's share of busy CPU says whether it waits or computes.
cpu_ticks() {
  awk '/^cpu /{ idle = $5 + $6; busy = 0; for (i = 2; i <= NF; i++) busy += $i; print busy - idle, idle; exit }' /proc/stat
}
# busy_pct "BUSY0 IDLE0" "BUSY1 IDLE1": the share of CPU time that was busy between them.
busy_pct() {
  local b0 i0 b1 i1
  read -r b0 i0 <<<"$1"; read -r b1 i1 <<<"$2"
  local total=$(( (b1 - b0) + (i1 - i0) ))
  (( total > 0 )) && echo "$(( 100 * (b1 - b0) / total ))%" || echo "-"
}

# stage NAME COMMAND...: runs COMMAND in the foreground and records its wall time and
# how busy the CPUs were meanwhile (everything running counts, background jobs too).
stage() {
  local name=$1; shift
  echo "== $name"
  disk
  local t0=$SECONDS rc=0 c0
  c0=$(cpu_ticks)
  "$@" || rc=$?
  local took=$((SECONDS - t0)) cpu
  cpu=$(busy_pct "$c0" "$(cpu_ticks)")
  stage_lines+=("$(printf '%-32s %5d s  cpu %4s' "$name" "$took" "$cpu")$([[ $rc -eq 0 ]] || echo "  FAILED ($rc)")")
  echo "== $name: $took s"
  if [[ $rc -ne 0 ]]; then
    summary
    exit "$rc"
  fi
}

# bg_start NAME COMMAND...: runs COMMAND in the background (at lower CPU priority with
# bg_start_nice), output to target/ci-logs/NAME.log; bg_wait NAME waits for it, shows the
# end of its log and records its time; bg_check stops the run early when a background
# job has already failed.
declare -A bg_pid=() bg_t0=() bg_done=()
bg_start() {
  local name=$1; shift
  echo "== $name (in the background: target/ci-logs/$name.log)"
  bg_t0[$name]=$(date +%s)
  rm -f "target/ci-logs/$name.end"
  # The job notes when it ended: its time is not when it is waited for. It runs in a
  # process group of its own (setsid), so that stopping the run stops everything it
  # started, not only its shell.
  LOG="target/ci-logs/$name.log" END="target/ci-logs/$name.end" setsid bash -c \
    'rc=0; "$@" >"$LOG" 2>&1 || rc=$?; date +%s >"$END"; exit "$rc"' bg-job "$@" &
  bg_pid[$name]=$!
}
bg_start_nice() { local name=$1; shift; bg_start "$name" nice -n 10 "$@"; }
bg_wait() {
  local name=$1 rc=0
  [[ -z ${bg_done[$name]:-} ]] || return 0  # already waited for (bg_check)
  local w0=$SECONDS
  wait "${bg_pid[$name]}" || rc=$?
  bg_done[$name]=1
  local end
  end=$(cat "target/ci-logs/$name.end" 2>/dev/null || date +%s)
  local took=$((end - bg_t0[$name])) waited=$((SECONDS - w0))
  echo "== $name (background) done: $took s, waited $waited s for it; end of its log:"
  # A failure's story may be far from the end (a failed test binary's output is
  # printed when it ends): then the failures and what surrounds them, and more tail.
  if [[ $rc -ne 0 ]]; then
    grep -n -B5 -A40 -E "panicked at|FAILED|^error" "target/ci-logs/$name.log" | head -n 400 \
      | sed 's/^/   ! /'
  fi
  tail -n "$([[ $rc -eq 0 ]] && echo 40 || echo 120)" "target/ci-logs/$name.log" | sed 's/^/   | /'
  stage_lines+=("$(printf '%-32s %5d s' "$name (bg)" "$took") (waited $waited s)$([[ $rc -eq 0 ]] || echo "  FAILED ($rc)")")
  if [[ $rc -ne 0 ]]; then
    summary
    exit "$rc"
  fi
}
bg_check() {
  local name
  for name in "${!bg_pid[@]}"; do
    if [[ -z ${bg_done[$name]:-} ]] && ! kill -0 "${bg_pid[$name]}" 2>/dev/null; then
      bg_wait "$name"  # finished: record it, and stop here if it failed
    fi
  done
}
# Background jobs die with the script, with every process they started (each job's
# process group: its pid is the group's id).
trap 'for p in "${bg_pid[@]}"; do kill -- "-$p" 2>/dev/null || true; done' EXIT

# Debian packages, the Python virtualenv and kafkajs: network and disk, no compiling;
# runs while cargo builds.
bg_start install-test-deps scripts/install-test-deps.sh

stage "cargo fmt --check" cargo fmt --all -- --check
# The host's seams (issue 27 item 4): no import circle through its layers.
stage "import circles (host, log)" bash -c \
  'python3 scripts/import-circles.py host/src && python3 scripts/import-circles.py log/src'

if ((quick)); then
  # In the shared target dir here (nothing runs beside it): clippy re-checks only the
  # crates changed since the last run, and shares artefacts with a plain `cargo clippy`.
  stage "cargo clippy -D warnings" cargo clippy --workspace --all-targets -- -D warnings
  stage "build (tests, broker, plugins)" scripts/integration-tests.sh --build-only
  stage "cargo test (unit)" cargo test --workspace --lib --bins
  bg_wait install-test-deps
  stage "integration tests (smoke)" scripts/integration-tests.sh --no-build -m smoke \
    -n "${PYTEST_WORKERS:-4}"
  summary
  exit 0
fi

# Three builds that share no artefacts (clippy's check build, the test build, the
# sanitizer build of the fuzz targets in fuzz/target) overlap: clippy (then rustdoc)
# and the fuzz
# build run in the background at lower CPU priority (nice), so the test build and then
# the tests get the CPU first and the background builds take what they leave. Clippy
# has a target dir of its own (target/clippy): in the shared one, cargo's lock on the
# build directory would make the builds wait for each other.
#
# Rustdoc with -D warnings (broken intra-doc links, private items linked from public
# docs, unclosed HTML in doc comments) runs after clippy in the same job and target dir:
# it reuses clippy's checked dependencies (about 50 crates are checked again, where
# dev-dependency features differ) and adds about 30 s of rustdoc; the job took 110 s
# more on a loaded 2-core machine (docs/benchmarks.md, "CI stage times").
lint() {
  local t0=$SECONDS
  CARGO_TARGET_DIR=target/clippy cargo clippy --workspace --all-targets --timings \
    -- -D warnings || return
  echo "== clippy: $((SECONDS - t0)) s"
  t0=$SECONDS
  CARGO_TARGET_DIR=target/clippy RUSTDOCFLAGS="-D warnings" \
    cargo doc --workspace --no-deps || return
  echo "== rustdoc -D warnings: $((SECONDS - t0)) s"
}
# `nice` runs a program, not a function: hand the function to a bash of its own.
bg_start_nice clippy-rustdoc bash -c "$(declare -f lint); lint"
# The fuzz targets' build, then their smoke run (SECONDS_PER_TARGET each, time-bound:
# with less CPU it runs fewer inputs, not longer), in one background job.
bg_start_nice fuzz scripts/fuzz-smoke.sh
# krafka's share consumer, a second share-group client for the integration tests
# (tests/clients/krafka-share, a workspace of its own): built beside the rest, so that
# test_share_krafka.py's build of it finds it done (or waits on cargo's lock for it).
bg_start_nice krafka-client cargo build -q --locked \
  --manifest-path tests/clients/krafka-share/Cargo.toml --target-dir target/krafka-client

# One build of every test binary, the broker and the plugins (the same command as
# scripts/integration-tests.sh's, so the integration stage compiles nothing).
stage "build (tests, broker, plugins)" scripts/integration-tests.sh --build-only
bg_check
# The two test suites overlap: both mostly wait (on real ZooKeeper, PostgreSQL and
# brokers, on timers); the integration suite alone kept the two cores 73% busy
# (docs/benchmarks.md, "CI stage times"). `cargo test --workspace` runs in the
# background at a little lower priority than the integration tests (nice 5; the
# background builds have 10), its binaries three at a time
# (scripts/run-test-binaries.py), then the doc-tests.
bg_wait install-test-deps
bg_start cargo-test nice -n 5 bash -c \
  'rc=0; scripts/run-test-binaries.py || rc=$?; cargo test --workspace --doc || rc=$?; exit $rc'
stage "integration tests" scripts/integration-tests.sh --no-build
bg_wait cargo-test
bg_wait krafka-client
bg_wait clippy-rustdoc
bg_wait fuzz
summary
