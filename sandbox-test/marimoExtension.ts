/**
 * The marimo extension the harness's `marimo extension` suite runs against: the real one
 * (marimo-team.vscode-marimo, with the Python extension it depends on) when SANDBOX_EXTENSIONS
 * gives it, else the FAKE in test/fixtures/fake-marimo (agent-bridge-tests.fake-marimo), packed
 * into a .vsix here. Either way the same checks run; the run's log says which one.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { sleep } from '../src/core/sleep';
import { findExtension, packFixture, type GivenExtension } from './extensions';
import { STACK, STACK_ROOT } from './stack';
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

/**
 * marimo runs its language server with `uv tool run --python ">=3.13,<3.15"`, and uv cannot
 * download a Python here. VS Code's extension host takes PATH from a login shell, so the Python
 * is offered where uv looks besides: a folder of "managed" Pythons (UV_PYTHON_INSTALL_DIR), as a
 * `cpython-<version>-<os>-<arch>-gnu/bin/` of links to it, kept in the stack like the venv.
 */
function uvPythons(python: string): string {
  const r = spawnSync(python, ['-c', 'import platform, sys; print("%d.%d.%d" % sys.version_info[:3], platform.machine())'], {
    encoding: 'utf8',
  });
  const [version, machine] = r.stdout.trim().split(' ');
  if (r.status !== 0 || !version || !machine) throw new Error(`${LSP_PYTHON_VAR}=${python} does not run: ${r.stderr}`);
  const root = path.join(STACK_ROOT, 'uv-pythons');
  const bin = path.join(root, `cpython-${version}-linux-${machine}-gnu`, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  const minor = version.split('.').slice(0, 2).join('.');
  for (const name of [`python${minor}`, 'python3', 'python']) {
    fs.rmSync(path.join(bin, name), { force: true });
    fs.symlinkSync(python, path.join(bin, name));
  }
  return root;
}

/** Packs the fake into `dir`. */
export function packFakeMarimo(dir: string): string {
  return packFixture(FAKE_MARIMO_DIR, dir, 'fake-marimo');
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
      env: lspPython ? { UV_PYTHON_INSTALL_DIR: uvPythons(lspPython) } : {},
      // marimo's controllers are named after the Python environments the Python extension knows,
      // which need not include the setup's venv; its sandbox controller makes a uv environment
      // with marimo from PyPI.
      pick: process.env['MARIMO_KERNEL_PICK'] || 'marimo sandbox',
      describe:
        `the REAL marimo extension ${real.extension.version} (${real.extension.vsix})` +
        (lspPython
          ? `, its language server on ${lspPython}`
          : `; ${LSP_PYTHON_VAR} is not set, so its language server asks uv for a Python >= 3.13, which needs the internet: set it to such a Python if opening the notebook fails`),
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

/**
 * Opens a notebook through `opening` (a `POST /notebooks/open` or `/notebooks/kernel/start` with
 * a kernel) and, when VS Code shows its kernel picker, picks the item whose text includes `pick`,
 * as the person would. The picker may first list other choices ("Select Another Kernel..."
 * beside a suggested controller, then kernel sources such as marimo's): an item that includes one
 * of `via` is opened, else a lone item. Resolves with `opening`'s answer; throws naming the items
 * when neither matches.
 */
export async function openPickingKernel<T>(
  page: Page,
  opening: Promise<T>,
  pick: string,
  via: readonly string[] = [],
  timeoutMs = 140_000,
): Promise<T> {
  const input = page.locator('.quick-input-widget input');
  const picker = input.waitFor({ state: 'visible', timeout: timeoutMs }).then(() => 'picker' as const);
  picker.catch(() => undefined);
  if ((await Promise.race([opening.then(() => 'opened' as const), picker])) === 'picker') {
    const rows = page.locator('.quick-input-widget .monaco-list-row');
    const wanted = [pick, ...via];
    for (let level = 0; ; level++) {
      let texts: string[] = [];
      for (const end = Date.now() + 30_000; Date.now() < end; await sleep(500)) {
        texts = await rows.allInnerTexts();
        if (texts.some((t) => wanted.some((w) => t.includes(w)))) break;
      }
      const at = texts.findIndex((t) => t.includes(pick));
      const next = at >= 0 ? at : texts.findIndex((t) => via.some((w) => t.includes(w)));
      if (next < 0 && !(texts.length === 1 && level < 3))
        throw new Error(`no "${pick}" among the kernel picker's items: ${JSON.stringify(texts).slice(0, 600)}`);
      await rows.nth(next >= 0 ? next : 0).click();
      if (at >= 0) break;
    }
  }
  return opening;
}
