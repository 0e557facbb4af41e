#!/usr/bin/env bash
# The main job: build everything, list the plugin directory, check the configured
# plugins as startup does, then run the broker with its plugins on the embedded
# defaults (Kafka on 127.0.0.1:9092, admin API on 127.0.0.1:9644) until Ctrl-C.
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
echo "== drover serve --config $config   (Ctrl-C or SIGTERM stops it)"
echo "   try: kcat -b 127.0.0.1:9092 -L ; curl -s 127.0.0.1:9644/metrics"
exec "$release/drover" serve --config "$config"
