/** Where the VS Code stack and the sandboxes live (`.vscode-test/`, or $AGENT_BRIDGE_STACK). */
import * as path from 'node:path';

export const REPO_ROOT = path.resolve(__dirname, '..');
export const STACK_ROOT = path.resolve(process.env['AGENT_BRIDGE_STACK'] || path.join(REPO_ROOT, '.vscode-test'));
export const STACK = {
  node24Bin: path.join(STACK_ROOT, 'node24', 'node_modules', '.bin'),
  codeServer: path.join(STACK_ROOT, 'code-server', 'bin', 'code-server'),
  chromium: process.env['AGENT_BRIDGE_CHROMIUM'] || '/usr/bin/chromium',
  runsDir: path.join(STACK_ROOT, 'runs'),
  /** Workspace copies made by sandbox-up (removed with their sandbox). */
  workspacesDir: path.join(STACK_ROOT, 'workspaces'),
  recordsDir: path.join(STACK_ROOT, 'sandboxes'),
  /** The venv of pinned PyPI packages setup makes (marimo, ipykernel, Jupyter Server, peers). */
  venvPython: path.join(STACK_ROOT, 'venv', 'bin', 'python'),
  venvBin: path.join(STACK_ROOT, 'venv', 'bin'),
};
/** Environment variable every sandbox process carries; its value is the sandbox id. */
export const MARKER_VAR = 'AGENT_BRIDGE_SANDBOX';
