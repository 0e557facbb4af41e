#!/usr/bin/env bash
# The main job: build everything, then run the broker's plugin phase on the embedded
# defaults: list the plugin directory, and load and start the configured plugins
# (assignors, and the embedded offset store) exactly as broker startup does.
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
