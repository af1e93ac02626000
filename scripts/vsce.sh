#!/usr/bin/env bash
# Runs vsce (the VS Code extension packager) under setup's Node 24: vsce needs Node 22 or newer,
# and the project builds and tests on Node 20, so vsce is installed by setup into the stack
# (.vscode-test/ or $AGENT_BRIDGE_STACK) rather than among the devDependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${AGENT_BRIDGE_STACK:-$PWD/.vscode-test}"
NODE24="$ROOT/node24/node_modules/.bin/node"
VSCE="$ROOT/vsce/node_modules/@vscode/vsce/vsce"
if [ ! -x "$NODE24" ] || [ ! -f "$VSCE" ]; then
  echo "vsce or Node 24 is missing from $ROOT: run \`npm run setup\` first (it installs both)." >&2
  exit 1
fi
exec "$NODE24" "$VSCE" "$@"
