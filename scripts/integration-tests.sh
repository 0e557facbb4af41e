#!/usr/bin/env bash
# Real-client integration tests: starts `target/debug/drover serve` per test and drives
# it with kcat, confluent-kafka, kafka-python and kafkajs (tests/integration). Installs what
# they need first (scripts/install-test-deps.sh). Extra arguments go to pytest, e.g.
#   scripts/integration-tests.sh -k durability -x
#   scripts/integration-tests.sh -n 0            # one test at a time, in this process
# Tests run in PYTEST_WORKERS processes (pytest-xdist, default 4; each has its own ports,
# temp directories and PostgreSQL/ZooKeeper servers; tests that must not overlap with
# each other share an `xdist_group`, see tests/integration/pytest.ini) unless the
# arguments say `-n`.
#   --no-build    skip the cargo build (scripts/test.sh built everything already)
#   --build-only  only build the broker and the plugin libraries the tests install
# DROVER_BIN overrides the broker binary; DROVER_TEST_RUST_LOG its log level (info).
# Reports: target/pytest-durations.txt (the 30 slowest tests), target/pytest-report.xml.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
run=1
case "${1:-}" in
  --no-build) build=0; shift ;;
  --build-only) run=0; shift ;;
esac

if ((run)); then
  scripts/install-test-deps.sh
fi
if ((build)); then
  echo "== cargo build: the broker and the plugin libraries the tests install"
  # Every target `cargo test --workspace` runs, as scripts/test.sh's build stage does:
  # the same features (dev-dependencies included), so neither build redoes the other's
  # work. (`cargo build -p drover-host -p ...` resolved features without the
  # dev-dependencies and rebuilt tokio, kafka-protocol, the host and every plugin: about
  # 4 minutes on 2 cores.) The benches are left out: no stage runs them, and clippy's
  # `--all-targets` in the lint job compiles them far enough to catch a broken one.
  cargo build -q --workspace --lib --bins --tests --examples --timings
fi
if ((!run)); then
  exit 0
fi

workers=(-n "${PYTEST_WORKERS:-4}")
for a in "$@"; do
  case "$a" in
    -n|-n[0-9]*|--numprocesses|--numprocesses=*) workers=() ;;
  esac
done
echo "== pytest tests/integration ${workers[*]} $*"
log=target/ci-logs/pytest.log
mkdir -p target/ci-logs
rc=0
target/test-venv/bin/python -m pytest -q tests/integration --dist loadgroup \
  --durations=30 --junitxml=target/pytest-report.xml "${workers[@]}" "$@" 2>&1 \
  | tee "$log" || rc=$?
# The durations section of the report, for a slow run to say why.
sed -n '/slowest .*durations/,/^=\+ .* in [0-9.]\+s/p' "$log" >target/pytest-durations.txt || true
exit "$rc"
