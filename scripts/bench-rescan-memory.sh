#!/usr/bin/env bash
# Resident memory a broker keeps per replaced plugin library (docs/benchmarks.md,
# "Plugin rescans: memory per replaced library"). Starts a debug `drover serve` with the
# coordinator, range and embedded plugins, then replaces one assignor file N times (each
# copy made distinct by appending bytes, so each is a new library) with a rescan after
# each, and prints the broker's VmRSS before and after every batch of 10.
#   scripts/bench-rescan-memory.sh [N=20] [PROFILE=release]
# PROFILE is the profile of the replaced assignor (the `lopsided` test fixture).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
profile=${2:-release}
flag=$([ "$profile" = release ] && echo --release || true)
cargo build -q -p drover-host -p drover-coordinator -p drover-assignor-range -p drover-offsets-embedded
cargo build -q $flag -p drover-fixture-lopsided-v1
bin=target/debug
lib=target/$([ "$profile" = release ] && echo release || echo debug)/libdrover_fixture_lopsided_v1.so
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/plugins" "$work/data"
chmod 755 "$work/plugins"
cp $bin/libdrover_coordinator.so $bin/libdrover_assignor_range.so $bin/libdrover_offsets_embedded.so "$work/plugins/"
chmod 644 "$work/plugins"/*
port=$((20000 + RANDOM % 20000))
$bin/drover serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$((port + 1)) \
  --data-dir "$work/data" --plugin-dir "$work/plugins" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$((port + 1))/v1/plugins" >/dev/null 2>&1 && break
  sleep 0.2
done
rss() { awk '/VmRSS/ {print $2}' /proc/$pid/status; }
echo "assignor file: $lib ($(stat -c %s "$lib") bytes)"
echo "replacements 0: VmRSS $(rss) kB"
for i in $(seq 1 "$n"); do
  cp "$lib" "$work/plugins/.new"
  printf 'distinct-%06d' "$i" >>"$work/plugins/.new"
  chmod 644 "$work/plugins/.new"
  mv "$work/plugins/.new" "$work/plugins/liblopsided.so"
  $bin/drover plugins rescan --admin 127.0.0.1:$((port + 1)) >/dev/null
  if [ $((i % 10)) -eq 0 ]; then
    sleep 1
    echo "replacements $i: VmRSS $(rss) kB"
  fi
done
