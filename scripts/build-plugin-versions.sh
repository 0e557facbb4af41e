#!/usr/bin/env bash
# Builds N genuinely rebuilt versions of the `load-aware` assignor plugin, as a plugin
# author releasing N versions would: a copy of plugins/assignor-load-aware outside the
# workspace (its own Cargo.toml with the workspace's Cargo.lock), rebuilt by rustc once
# per version with the package version bumped (0.1.1, 0.1.2, ...). A version is part of
# the crate's metadata hash, so every build has other symbol names and other bytes
# throughout, unlike a copy with bytes appended. For the rescan memory bench
# (scripts/bench-rescan-memory.sh, docs/benchmarks.md).
#
#   scripts/build-plugin-versions.sh [N=30] [OUT=target/bench-rescan/builds]
#
# Prints OUT; leaves OUT/libload_aware-0.1.K.so for K = 1..N (kept between runs: a
# version already built is not built again). Release profile with line tables, as the
# workspace's. The scratch crate and its own target dir are under target/bench-rescan/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${1:-30}
out=${2:-target/bench-rescan/builds}
scratch=target/bench-rescan/crate
mkdir -p "$out" "$scratch"
out=$(cd "$out" && pwd)
rm -rf "$scratch/src"
cp -r plugins/assignor-load-aware/src "$scratch/src"
rm -f "$scratch/src/tests.rs"
# Drop the unit test module (its dev-dependencies are not part of the copy).
sed -i '/^#\[cfg(test)\]$/{N;/mod tests;/d}' "$scratch/src/lib.rs"
cp Cargo.lock "$scratch/Cargo.lock"
for k in $(seq 1 "$n"); do
  so="$out/libload_aware-0.1.$k.so"
  [ -s "$so" ] && continue
  cat >"$scratch/Cargo.toml" <<EOF
[package]
name = "drover-assignor-load-aware"
version = "0.1.$k"
edition = "2021"
publish = false

[lib]
name = "drover_assignor_load_aware"
crate-type = ["cdylib"]

[dependencies]
drover-abi = { path = "$root/abi" }
toml = "0.8"
tracing = "0.1"

[profile.release]
debug = "line-tables-only"

[workspace]
EOF
  # The workspace's lock file pins every version; cargo drops the entries the copy
  # does not use (so no --locked).
  (cd "$scratch" && CARGO_INCREMENTAL=0 cargo build -q --release)
  cp "$scratch/target/release/libdrover_assignor_load_aware.so" "$so"
done
echo "$out"
