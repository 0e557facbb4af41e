#!/usr/bin/env bash
# Transactions back to back (docs/benchmarks.md, "Transactions back to back", issue 28
# item 6): starts `DROVER_BIN serve` (default target/debug/drover) on free loopback
# ports with an empty data directory, runs N transactions with kafkajs and with
# confluent-kafka, prints the seconds each took and kafkajs' ERROR lines, stops it.
# Needs scripts/install-test-deps.sh (kafkajs, the Python clients).
#   scripts/bench-txn-back-to-back.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-200}"
bin="${DROVER_BIN:-target/debug/drover}"
dir="$(mktemp -d)"
port=$(target/test-venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
admin=$(target/test-venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" \
  --data-dir "$dir/data" --plugin-dir "$dir/plugins" >"$dir/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do grep -q "drover ready" "$dir/broker.log" && break; sleep 0.1; done
NODE_PATH=target/test-node/node_modules node tests/integration/kafkajs_transactions.js \
  "127.0.0.1:$port" "kjs-b2b" "kjs-b2b-id" "$n" \
  | target/test-venv/bin/python -c 'import json,sys; d=json.loads(sys.stdin.read().splitlines()[-1]); print(json.dumps({"client": "kafkajs", "transactions": d["transactions"], "seconds": round(d["seconds"], 2), "error_lines": len(d["errors"])}))'
target/test-venv/bin/python tests/conformance/benches/txn_back_to_back.py "127.0.0.1:$port" "$n"
