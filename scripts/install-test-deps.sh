#!/usr/bin/env bash
# Installs what the real-client integration tests (tests/integration) need:
#   - Debian packages kcat, openssl and netcat-openbsd (only when missing);
#   - a Python virtualenv at target/test-venv with pinned Kafka clients, pytest and
#     the compression libraries kafka-python uses for snappy/lz4/zstd;
#   - Node.js and npm (Debian packages, when missing) and the pinned kafkajs client
#     under target/test-node (tests/integration/test_offset_reset.py);
#   - Debian's chromium and chromium-driver (the web console's browser tests drive it
#     with selenium, tests/integration/test_console.py) and tmux (kaskade, a terminal
#     UI, runs under it there).
# Idempotent and fast when everything is already there. Run as root (or with sudo
# available) when the Debian packages are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/test-venv
# Pins. Bump together with tests/integration (the tests use these clients' APIs).
PY_REQS=(
  "confluent-kafka==2.16.2"  # 2.16.2: ShareConsumer (KIP-932)
  "kafka-python==3.0.12"
  "python-snappy==0.7.3"   # kafka-python imports `snappy` (pure Python on cramjam)
  "cramjam==2.14.0"
  "lz4==4.4.5"             # kafka-python imports `lz4.frame`
  "zstandard==0.25.0"      # kafka-python imports `zstandard`
  "crc32c==2.9.post0"      # optional: fast CRC-32C for kafka-python's record batches
  "aiokafka==0.14.0"       # asyncio client (tests/integration/test_sasl.py: SASL_PLAINTEXT)
  "pytest==9.2.0"
  "pytest-timeout==2.4.0"
  "pytest-xdist==3.8.0"    # scripts/integration-tests.sh runs the tests in several processes
  "execnet==2.1.2"         # pytest-xdist's transport
  "selenium==4.51.0"       # drives Debian's chromium (tests/integration/test_console.py)
  "kaskade==5.1.0"         # a Kafka terminal UI, run under tmux (test_console.py)
)

# --- Debian packages -------------------------------------------------------------
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
# The openssl CLI makes the TLS tests' certificates (tests/integration/test_tls.py).
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# netcat-openbsd specifically (nc -z, -q); another netcat does not count.
dpkg-query -W -f='${Status}' netcat-openbsd 2>/dev/null | grep -q "install ok installed" \
  || missing+=(netcat-openbsd)
# PostgreSQL's server binaries (initdb, postgres, psql) for the `postgres` offset store tests.
dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q "install ok installed" \
  || missing+=(postgresql)
# ZooKeeper 3.8 (server jar run by the tests themselves) for the `zookeeper` offset store.
dpkg-query -W -f='${Status}' zookeeper 2>/dev/null | grep -q "install ok installed" \
  || missing+=(zookeeper)
# The web console's browser tests: headless chromium driven by chromedriver, and tmux
# for kaskade (tests/integration/test_console.py).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# Node.js and npm for the kafkajs tests (an existing node, e.g. NodeSource's with its
# own npm, is kept).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- kafkajs (npm) -------------------------------------------------------------------
NODE_DIR=target/test-node
# Pin. Bump together with tests/integration/kafkajs_*.js.
NODE_REQS=("kafkajs@2.2.4")
node_stamp="$NODE_DIR/.drover-reqs"
node_want="$(printf '%s\n' "${NODE_REQS[@]}")"
if ! command -v npm >/dev/null 2>&1; then
  echo "== npm not found: the kafkajs tests will be skipped"
elif [[ ! -f $node_stamp || "$(cat "$node_stamp")" != "$node_want" \
        || ! -f $NODE_DIR/node_modules/kafkajs/package.json ]]; then
  echo "== installing ${NODE_REQS[*]} into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  npm install --prefix "$NODE_DIR" --no-audit --no-fund --no-save --silent "${NODE_REQS[@]}"
  printf '%s\n' "$node_want" >"$node_stamp"
fi

# --- Python virtualenv -------------------------------------------------------------
PYTHON=${PYTHON:-python3}
stamp="$VENV/.drover-reqs"
want="$(printf '%s\n' "${PY_REQS[@]}")"
if [[ -x $VENV/bin/python && -f $stamp && "$(cat "$stamp")" == "$want" ]] \
   && "$VENV/bin/python" -c 'import confluent_kafka, kafka, aiokafka, pytest, pytest_timeout, xdist, snappy, lz4.frame, zstandard, crc32c, selenium, kaskade' 2>/dev/null; then
  exit 0
fi
echo "== setting up Python virtualenv $VENV"
if [[ ! -x $VENV/bin/python ]]; then
  rm -rf "$VENV"
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    # Debian's own python3 needs python3-venv for ensurepip.
    echo "== installing Debian package python3-venv"
    rm -rf "$VENV"
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq python3-venv >/dev/null
    "$PYTHON" -m venv "$VENV"
  fi
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PY_REQS[@]}"
"$VENV/bin/python" -c 'import confluent_kafka, kafka, aiokafka, pytest, pytest_timeout, xdist, snappy, lz4.frame, zstandard, crc32c, selenium, kaskade'
printf '%s\n' "$want" >"$stamp"
