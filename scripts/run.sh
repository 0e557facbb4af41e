#!/usr/bin/env bash
# The main job: build everything, then run the broker's plugin phase on the embedded
# defaults: list the plugin directory, and load and start the configured plugins
# (assignors, and the embedded offset store) exactly as broker startup does.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
echo
echo "== drover plugins list --plugin-dir target/release/plugins"
target/release/drover plugins list --plugin-dir target/release/plugins
echo
echo "== drover plugins check --config config/drover.toml"
target/release/drover plugins check --config config/drover.toml
