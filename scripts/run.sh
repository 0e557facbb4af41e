#!/usr/bin/env bash
# The main job: build everything, list the plugin directory, check the configured
# plugins as startup does, then run `drover demo`: a broker with the coordinator,
# sticky assignor and embedded offset store, the lines of real files produced with a
# Kafka client, a group of three consumers with one killed midway, and a summary
# (exit status 1 if anything is missing).
#   scripts/run.sh [DEMO OPTIONS]   e.g. --input FILE (repeatable), --rate LINES_PER_S
#   scripts/run.sh serve            instead run the broker on the embedded defaults
#                                   (Kafka 127.0.0.1:9092, admin 127.0.0.1:9644) until
#                                   Ctrl-C
# Honours CARGO_TARGET_DIR (default ./target): config/drover.toml's paths under
# target/release are rewritten into a generated config in the target directory.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
release="$target_dir/release"

scripts/build.sh

# config/drover.toml with every "target/release/..." path moved under $release
# (escaped for a TOML basic string).
escaped=${release//\\/\\\\}
escaped=${escaped//\"/\\\"}
config_text=$(<config/drover.toml)
from='"target/release/'
to="\"$escaped/"
config="$release/drover.toml"
printf '%s\n' "${config_text//"$from"/"$to"}" >"$config"

echo
echo "== drover plugins list --plugin-dir $release/plugins"
"$release/drover" plugins list --plugin-dir "$release/plugins"
echo
echo "== drover plugins check --config $config (generated from config/drover.toml)"
"$release/drover" plugins check --config "$config"
echo
if [[ "${1:-}" == "serve" ]]; then
  echo "== drover serve --config $config   (Ctrl-C or SIGTERM stops it)"
  echo "   try: kcat -b 127.0.0.1:9092 -L ; curl -s 127.0.0.1:9644/metrics"
  exec "$release/drover" serve --config "$config"
fi
echo "== drover demo --plugin-dir $release/plugins $*"
exec "$release/drover" demo --plugin-dir "$release/plugins" "$@"
