import * as vscode from 'vscode';
import { BridgeError } from '../core/bridgeError';
import { MARIMO_PYTHON } from '../core/model/cellLanguages';
import type { InterruptHow, Kernel, KernelStatus } from '../core/model/kernelPort';
import {
  ApiKernelAdapter,
  asKernelsApi,
  type ApiKernel,
  ExtensionKernels,
  type ExtensionKernelSource,
  field,
  label,
  type ScratchpadRules,
  withNotice,
} from './extensionApi';
import { KernelUnavailable } from './kernelProvider';

const MARIMO_ID = 'marimo-team.vscode-marimo';
export const MARIMO_NOTEBOOK_TYPE = 'marimo-notebook';
/** Picking a kernel and starting it (marimo's first start of a venv can take a while). */
const START_TIMEOUT_MS = 120_000;

/** The language id marimo's extension gives Python cells: its own, unless the person turned that off. */
export function marimoPythonLanguage(): string {
  return vscode.workspace.getConfiguration('marimo').get<boolean>('disableManagedLanguageFeatures', false)
    ? 'python'
    : MARIMO_PYTHON;
}

/** Whether an extension's manifest contributes the marimo notebook type. */
function servesMarimoNotebooks(extension: vscode.Extension<unknown>): boolean {
  const notebooks = field(field(extension.packageJSON, 'contributes'), 'notebooks');
  return Array.isArray(notebooks) && notebooks.some((n) => field(n, 'type') === MARIMO_NOTEBOOK_TYPE);
}

/**
 * marimo's extension (marimo-lsp) exports `experimental.kernels.getKernel(uri)`, a partial copy
 * of the Jupyter extension's kernels API: undefined until a controller is selected for the
 * notebook, a kernel whose status is always "idle", and `executeCode(code, token)` yielding VS
 * Code cell outputs converted from marimo's notifications (channels flattened away). Cancelling
 * the token ends the stream; from marimo-lsp 0.17 it also cancels that scratchpad run, before
 * that the kernel went on. Another extension serving `marimo-notebook` with the same API is used
 * when marimo's own is not installed.
 */
export const MARIMO_SOURCE: ExtensionKernelSource = {
  name: 'marimo',
  label: 'marimo',
  extensionId: MARIMO_ID,
  notebookType: MARIMO_NOTEBOOK_TYPE,
  extension: () => vscode.extensions.getExtension(MARIMO_ID) ?? vscode.extensions.all.find(servesMarimoNotebooks),
  kernels: (exports) => asKernelsApi(field(field(exports, 'experimental'), 'kernels')),
  noKernelHint: 'select a marimo kernel for the notebook (the kernel picker at the top right) and run a cell once',
};

/**
 * What an agent following marimo-pair's skill meets: its notebook edits go through marimo's
 * `marimo._code_mode`, which needs the notebook document that marimo's server (and marimo's VS
 * Code extension from 0.17 on) hands the kernel with a scratchpad run. Where it is missing,
 * code_mode raises one of these (or marimo is not importable at all).
 */
const CODE_MODE_UNAVAILABLE =
  /NotebookDocument not available|code mode requires a running kernel context|ContextNotInitializedError|No module named 'marimo/;
export const CODE_MODE_HINT =
  "Agent Bridge: marimo's code_mode (marimo._code_mode) is not available in this kernel of marimo's VS Code extension " +
  '(the extension hands code_mode the notebook from version 0.17 on). ' +
  'Change cells through the bridge instead: its cell routes (GET/POST /notebooks/cells, PATCH/DELETE /notebooks/cells/{id}, ' +
  'POST /notebooks/cells/{id}/run), its MCP tools (create_cell, edit_cell, delete_cell, run_cell), ' +
  'or its own code mode (import agent_bridge) in an .ipynb with the builtin kernel.';

/** The agent's code goes as it is: marimo's scratchpad already discards new bindings. */
const MARIMO_RULES: ScratchpadRules = {
  wrap: (code) => code,
  admit: async (_onStream, signal) => !signal.aborted,
  linksInErrors: true,
  failureHint: (code, stderr) =>
    /\bmarimo\._code_mode\b|from\s+marimo\s+import\s+_code_mode/.test(code) && CODE_MODE_UNAVAILABLE.test(stderr)
      ? CODE_MODE_HINT
      : undefined,
};

/** marimo's API gives every kernel the status "idle", whatever it runs: the bridge does not pass that on as a fact. */
const MARIMO_STATUS: KernelStatus = {
  state: 'unknown',
  note: "marimo's extension reports every kernel as idle, whatever it runs, and no restarts: the cells' own status says what runs",
};

/** marimo notebooks through marimo's extension: its API for code, its controller for interrupt. */
export class MarimoKernels extends ExtensionKernels {
  constructor() {
    super(MARIMO_SOURCE);
  }

  protected adapt(_notebook: vscode.NotebookDocument, kernel: ApiKernel): Kernel {
    return new ApiKernelAdapter(MARIMO_SOURCE, kernel, MARIMO_RULES, () => MARIMO_STATUS);
  }

  /**
   * The API has no interrupt and marimo contributes no interrupt command: VS Code's "Interrupt"
   * of the notebook calls the selected controller's interrupt handler, which interrupts marimo's
   * kernel (whatever it runs: a cell or a scratchpad).
   */
  async interrupt(notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined> {
    if (!(await this.usable(notebook))) return undefined;
    await vscode.commands.executeCommand('notebook.cancelExecution', notebook.uri);
    return 'sigint';
  }

  async restart(notebook: vscode.NotebookDocument): Promise<boolean> {
    if (!(await this.usable(notebook))) return false;
    throw new BridgeError(
      'conflict',
      `The bridge cannot restart marimo's kernel of ${label(notebook)}: the person restarts it with the command "marimo: Restart Kernel"`,
    );
  }

  /**
   * marimo makes a controller per Python environment and no API selects one unseen; its kernel
   * starts with a cell run. So the bridge runs a starter cell (see startWithCell): VS Code takes
   * the only marimo controller, or shows the person its kernel picker, with a notification of
   * ours saying who asks.
   */
  async start(editor: vscode.NotebookEditor): Promise<void> {
    const notebook = editor.notebook;
    if (notebook.notebookType !== MARIMO_NOTEBOOK_TYPE)
      throw new BridgeError(
        'bad_input',
        `marimo kernels run marimo notebooks (${MARIMO_NOTEBOOK_TYPE}); ${label(notebook)} is a ${notebook.notebookType}`,
      );
    const extension = MARIMO_SOURCE.extension();
    if (!extension) throw new BridgeError('conflict', `The marimo extension (${MARIMO_ID}) is not installed in this VS Code`);
    await extension.activate();
    if (await this.usable(notebook)) return;
    const started = await withNotice(
      `Agent Bridge: an agent asks to start a marimo kernel for ${label(notebook)}. If VS Code lists kernels, pick one (Escape: none).`,
      // marimo's controller runs only cells of its own languages.
      this.startWithCell(notebook, START_TIMEOUT_MS, marimoPythonLanguage()),
    );
    if (!started)
      throw new BridgeError(
        'conflict',
        `No marimo kernel started for ${label(notebook)} within ${START_TIMEOUT_MS / 1000} s: ${MARIMO_SOURCE.noKernelHint}`,
      );
  }

  private async usable(notebook: vscode.NotebookDocument): Promise<boolean> {
    const found = await this.apiKernel(notebook);
    return found !== undefined && !(found instanceof KernelUnavailable);
  }
}
