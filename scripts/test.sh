#!/usr/bin/env bash
# Runs every test, installing what the tests need first. Called by .ci/run.
# Needs: a Rust toolchain (cargo, rustfmt, clippy). Everything else the tests use is
# built from this workspace (the plugins are loaded from the .so files cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
