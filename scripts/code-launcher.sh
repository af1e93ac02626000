#!/bin/sh
# Stand-in "VS Code executable" for @vscode/test-electron's runTests({ vscodeExecutablePath }).
# Maps the arguments runTests passes (--extensionDevelopmentPath=, --extensionTestsPath=, and a
# workspace folder as the first plain argument) onto the sandbox launcher, which runs the tests in a
# real VS Code (code-server + headless Chromium) and exits with their result. One option is ours:
# --install-vsix=FILE installs that .vsix into the sandbox first (how test-integration adds its
# FAKE marimo extension (test/fixtures/fake-marimo): the web workbench keeps only one extensionDevelopmentPath, its
# payload being a Map). Every other --option runTests adds (--no-sandbox, --user-data-dir=..., ...)
# is meant for Electron and ignored: the sandbox makes its own isolated dirs.
set -eu
HERE=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
DEV=
TESTS=
WS=
VSIX=
for a in "$@"; do
  case "$a" in
    --extensionDevelopmentPath=*) DEV="${a#*=}" ;;
    --extensionTestsPath=*) TESTS="${a#*=}" ;;
    --install-vsix=*) VSIX="${a#*=}" ;;
    --*) ;;
    *) [ -n "$WS" ] || WS="$a" ;;
  esac
done
if [ -z "$DEV" ] || [ -z "$TESTS" ]; then
  echo "code-launcher.sh: need --extensionDevelopmentPath= and --extensionTestsPath= (got: $*)" >&2
  exit 2
fi
set -- --dev "$DEV" --tests "$TESTS" --workspace "${WS:-$DEV}" --kind tests
[ -z "$VSIX" ] || set -- "$@" --vsix "$VSIX"
exec node --import "$HERE/node_modules/tsx/dist/loader.mjs" "$HERE/sandbox-test/vscode.ts" "$@"
