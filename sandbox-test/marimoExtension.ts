/**
 * The marimo extension the harness's `marimo extension` suite runs against: the real one
 * (marimo-team.vscode-marimo, with the Python extension it depends on) when SANDBOX_EXTENSIONS
 * gives it, else the FAKE in test/fixtures/fake-marimo (agent-bridge-tests.fake-marimo), packed
 * into a .vsix here. Either way the same checks run; the run's log says which one.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { findExtension, type GivenExtension } from './extensions';
import { STACK } from './stack';
import { REPO_ROOT } from './vscode';

export const MARIMO_ID = 'marimo-team.vscode-marimo';
export const FAKE_MARIMO_ID = 'agent-bridge-tests.fake-marimo';
export const FAKE_MARIMO_DIR = path.join(REPO_ROOT, 'test', 'fixtures', 'fake-marimo');
/** A Python ≥ 3.13 for the real extension's language server (uv cannot download one here). */
const LSP_PYTHON_VAR = 'MARIMO_LSP_PYTHON';

export interface MarimoUnderTest {
  id: string;
  /** Installed beside ours; undefined when it is among the given extensions already. */
  vsix: string | undefined;
  fake: boolean;
  /** User settings it needs in the sandbox. */
  settings: Record<string, unknown>;
  /** Environment for code-server (so for the extension host and what it starts). */
  env: Record<string, string>;
  /** What to type in VS Code's kernel picker to find its controller for the setup's venv. */
  pick: string;
  describe: string;
}

/** Packs the fake into `dir` (vsce, no dependencies: it has none). */
export function packFakeMarimo(dir: string): string {
  const vsix = path.join(dir, 'fake-marimo.vsix');
  const args = ['package', '--no-dependencies', '--skip-license', '--allow-missing-repository', '-o', vsix];
  const r = spawnSync(path.join(REPO_ROOT, 'node_modules', '.bin', 'vsce'), args, { cwd: FAKE_MARIMO_DIR, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`packing ${FAKE_MARIMO_DIR} failed (status ${r.status}): ${r.stdout}${r.stderr}`);
  return vsix;
}

/** The real extension when given (and its dependencies too), else the fake packed into `dir`. */
export function marimoUnderTest(given: readonly GivenExtension[], dir: string): MarimoUnderTest {
  const real = findExtension(given, MARIMO_ID);
  if ('extension' in real) {
    const lspPython = process.env[LSP_PYTHON_VAR];
    return {
      id: MARIMO_ID,
      vsix: undefined,
      fake: false,
      settings: {
        // The default "wasm" server needs pyodide wheels from a CDN; "python" runs marimo-lsp with uv.
        'marimo.lsp.server': 'python',
        'marimo.uv.path': path.join(STACK.venvBin, 'uv'),
        'python.defaultInterpreterPath': STACK.venvPython,
      },
      env: lspPython ? { UV_PYTHON: lspPython } : {},
      pick: STACK.venvPython,
      describe: `the REAL marimo extension ${real.extension.version} (${real.extension.vsix})`,
    };
  }
  return {
    id: FAKE_MARIMO_ID,
    vsix: packFakeMarimo(dir),
    fake: true,
    settings: { 'fakeMarimo.python': STACK.venvPython },
    env: {},
    pick: 'FAKE marimo',
    describe: `the FAKE marimo extension ${FAKE_MARIMO_ID} (${real.skip})`,
  };
}

/** Whether the given file is there (the fixture folder is copied into each workspace). */
export const MARIMO_FIXTURE = 'marimo_notebook.py';
export function marimoFixture(workspace: string): string {
  const file = path.join(workspace, MARIMO_FIXTURE);
  if (!fs.existsSync(file)) throw new Error(`${MARIMO_FIXTURE} is missing from the workspace ${workspace}`);
  return file;
}
