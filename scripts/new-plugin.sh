#!/usr/bin/env bash
# Starts a plugin crate outside this checkout from the template (templates/assignor):
#
#   scripts/new-plugin.sh DEST            copy the template to DEST; its drover-abi and
#                                         drover-plugin-testkit point at this checkout
#   scripts/new-plugin.sh --vendor DEST   the same, with copies of abi/ and
#                                         plugins/testkit/ inside DEST (vendor/drover/),
#                                         so DEST builds without the checkout
#
# DEST must not exist yet. The template's Cargo.lock comes along: it pins the
# third-party crates to the versions this checkout builds with, so `cargo build
# --offline --locked` in DEST works on a machine that has built Drover. Then rename the
# package (`my-assignor` in Cargo.toml, `my_assignor` in tests/, the plugin's NAME) and
# write your policy (docs/plugins.md, "An assignor, step by step").
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

vendor=0
if [[ ${1:-} == --vendor ]]; then vendor=1; shift; fi
if [[ $# -ne 1 || $1 == -* ]]; then
  echo "usage: $0 [--vendor] DEST" >&2
  exit 2
fi
dest=$1
if [[ -e $dest ]]; then
  echo "$dest exists already; name a new directory" >&2
  exit 1
fi

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cp -R "$repo/templates/assignor/." "$dest/"
rm -rf "$dest/target"

if ((vendor)); then
  # The testkit finds drover-abi at ../../abi: keep that layout. Its tests and
  # dev-dependencies are Drover's own broken fixtures, which stay behind.
  mkdir -p "$dest/vendor/drover/plugins"
  cp -R "$repo/abi" "$dest/vendor/drover/abi"
  cp -R "$repo/plugins/testkit" "$dest/vendor/drover/plugins/testkit"
  rm -rf "$dest/vendor/drover/abi/target" "$dest/vendor/drover/plugins/testkit/target" \
    "$dest/vendor/drover/plugins/testkit/tests"
  sed -i '/^\[dev-dependencies\]/,/^\[/{/^\[dev-dependencies\]/d;/^\[/!d}' \
    "$dest/vendor/drover/plugins/testkit/Cargo.toml"
  abi=vendor/drover/abi
  testkit=vendor/drover/plugins/testkit
else
  abi=$repo/abi
  testkit=$repo/plugins/testkit
fi
sed -i \
  -e "s|^drover-abi = { path = \"../../abi\" }|drover-abi = { path = \"$abi\" }|" \
  -e "s|^drover-plugin-testkit = { path = \"../../plugins/testkit\" }|drover-plugin-testkit = { path = \"$testkit\" }|" \
  "$dest/Cargo.toml"
grep -q "path = \"$abi\"" "$dest/Cargo.toml" && grep -q "path = \"$testkit\"" "$dest/Cargo.toml" || {
  echo "could not point $dest/Cargo.toml at drover-abi and the testkit (template changed?)" >&2
  exit 1
}
echo "$dest: a plugin crate (drover-abi from $abi); build it with: cd $dest && cargo build --release"
