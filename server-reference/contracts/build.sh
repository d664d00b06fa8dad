#!/usr/bin/env bash
# Rebuilds the devnet contracts' creation bytecode (*.bin, committed) from their Solidity source
# with solc-js 0.8.37 from the npm registry: `npm install --prefix /tmp/solc solc@0.8.37` once,
# then run this script. The output is deterministic for a given compiler version.
set -euo pipefail
cd "$(dirname "$0")"
solcjs=${SOLCJS:-/tmp/solc/node_modules/.bin/solcjs}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for source in *.sol; do
  "$solcjs" --bin --optimize --output-dir "$out" "$source" >/dev/null
  name=${source%.sol}
  cp "$out/${name}_sol_${name}.bin" "$name.bin"
done
