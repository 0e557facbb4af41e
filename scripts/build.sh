#!/usr/bin/env bash
# Builds the whole workspace in release mode and lays out the plugin directory
# <target dir>/release/plugins (mode 0755, files 0644: the broker refuses plugin files,
# and directories above them, that are writable by group or others).
# Honours CARGO_TARGET_DIR (default ./target).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"

cargo build --release --workspace

plugins=(
  drover_assignor_range
  drover_assignor_round_robin
  drover_assignor_sticky
  drover_assignor_load_aware
  drover_offsets_embedded
  drover_offsets_zookeeper
  drover_offsets_postgres
  drover_authorizer_acl
  drover_coordinator
  drover_example_weighted_assignor
  drover_example_policy_authorizer
)
dir="$target_dir/release/plugins"
mkdir -p "$dir"
chmod 0755 "$dir"
for p in "${plugins[@]}"; do
  install -m 0644 "$target_dir/release/lib$p.so" "$dir/"
done
echo "plugins installed in $dir"
