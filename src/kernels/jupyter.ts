import * as vscode from 'vscode';
import { BridgeError } from '../core/bridgeError';
import type { InterruptHow, Kernel, KernelState, KernelStatus } from '../core/model/kernelPort';
import type { Log } from '../core/log';
import {
  ApiKernelAdapter,
  ExtensionKernels,
  JUPYTER_SOURCE,
  label,
  withNotice,
  type ApiKernel,
  type ScratchpadRules,
} from './extensionApi';
import { JupyterAccess, refusal } from './jupyterAccess';
import { KernelUnavailable } from './kernelProvider';
import { VALUE_MIME, wrapPythonScratchpad } from './pythonScratchpad';

const START_TIMEOUT_MS = 60_000;

/**
 * The Jupyter extension's kernels: its exported kernels API for code (behind the person's
 * consent), its own commands for interrupt and restart, and its controllers for starting.
 * Python kernels get marimo's scratchpad semantics through a wrapper; other languages run the
 * code verbatim (kind `jupyter:<language>`).
 */
export class JupyterKernels extends ExtensionKernels implements vscode.Disposable {
  private readonly access: JupyterAccess;
  private readonly changed = new vscode.EventEmitter<void>();
  override readonly onDidChange = this.changed.event;
  /** Notebooks seen with a running kernel: others are re-checked when their cells change. */
  private readonly running = new WeakSet<vscode.NotebookDocument>();
  /** When a notebook's kernel was last seen (re)starting or dying: runs before it were another kernel's. */
  private readonly startedAt = new WeakMap<vscode.NotebookDocument, number>();
  private readonly disposables: vscode.Disposable[] = [this.changed];

  constructor(private readonly log: Log) {
    super(JUPYTER_SOURCE);
    this.access = new JupyterAccess(log);
    // The kernels API announces no kernel start to other extensions: a cell of a notebook with
    // no known kernel that changes (its run began or ended) is when one may have started.
    this.disposables.push(
      vscode.extensions.onDidChange(() => this.changed.fire()),
      vscode.workspace.onDidChangeNotebookDocument((e) => {
        if (e.notebook.notebookType !== JUPYTER_SOURCE.notebookType || this.running.has(e.notebook)) return;
        if (e.cellChanges.some((c) => c.executionSummary || c.outputs)) this.changed.fire();
      }),
    );
  }

  override async kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable | undefined> {
    const found = await this.apiKernel(notebook);
    if (!found || found instanceof KernelUnavailable) {
      this.running.delete(notebook);
      return found;
    }
    this.watch(notebook, found);
    if (await this.access.refused(found)) return new KernelUnavailable('forbidden', refusal(label(notebook)));
    return this.adapt(notebook, found);
  }

  protected override adapt(notebook: vscode.NotebookDocument, kernel: ApiKernel): Kernel {
    const language = kernel.language ?? 'python';
    const python = language.toLowerCase() === 'python';
    const status = (): KernelStatus => ({
      state: JUPYTER_STATES[kernel.status ?? 'unknown'] ?? 'unknown',
      startedAt: this.startedAt.get(notebook),
    });
    const rules = {
      wrap: python ? wrapPythonScratchpad : (code: string) => code,
      ...(python ? { valueMime: VALUE_MIME } : {}),
      admit: async (onStream: Parameters<ScratchpadRules['admit']>[0], signal: AbortSignal) =>
        (await ready(kernel, signal)) && this.access.admit(kernel, label(notebook), onStream, signal),
      accessHintOnError: false,
    };
    const adapter = new ApiKernelAdapter(JUPYTER_SOURCE, this.access.guard(kernel, label(notebook)), rules, status);
    return python ? adapter : Object.assign(adapter, { kind: `jupyter:${language}` });
  }

  /** Jupyter's queue cancels the cells behind a failed one (CellExecutionQueue in vscode-jupyter). */
  stopsAtFailure(notebook: vscode.NotebookDocument): boolean {
    return this.running.has(notebook);
  }

  override async interrupt(notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined> {
    const kernel = await this.apiKernel(notebook);
    if (!kernel || kernel instanceof KernelUnavailable) return undefined;
    // Jupyter's own command escalates as Jupyter does (it offers the person a restart itself).
    await vscode.commands.executeCommand('jupyter.interruptkernel', { notebookEditor: { notebookUri: notebook.uri } });
    return 'sigint';
  }

  override async restart(notebook: vscode.NotebookDocument): Promise<boolean> {
    const kernel = await this.apiKernel(notebook);
    if (!kernel || kernel instanceof KernelUnavailable) return false;
    // The command returns before the restart is done: wait for the kernel to come back idle.
    // It first asks the person to confirm, unless they turned jupyter.askForKernelRestart off.
    const back = this.whenIdleAgain(kernel, notebook);
    back.catch(() => undefined); // awaited below; the command may still be waiting on the person
    await Promise.race([vscode.commands.executeCommand('jupyter.restartkernel', notebook.uri), back]);
    await back;
    return true;
  }

  /**
   * Jupyter makes the controller of a local kernelspec only when the person picks it from its
   * "Jupyter Kernel..." list (no API or command selects one unseen), so the bridge opens that
   * list for the person, says in a notification of its own who asks and why, and then starts
   * the kernel they picked.
   */
  override async start(editor: vscode.NotebookEditor): Promise<void> {
    const notebook = editor.notebook;
    if (notebook.notebookType !== JUPYTER_SOURCE.notebookType)
      throw new BridgeError(
        'bad_input',
        `Jupyter kernels run .ipynb (jupyter-notebook) notebooks; ${label(notebook)} is a ${notebook.notebookType}`,
      );
    const extension = vscode.extensions.getExtension(JUPYTER_SOURCE.extensionId);
    if (!extension)
      throw new BridgeError('conflict', 'The Jupyter extension (ms-toolsai.jupyter) is not installed in this VS Code');
    await extension.activate();
    if (!((await this.apiKernel(notebook)) instanceof KernelUnavailable)) return;
    const picked = await withNotice(
      `Agent Bridge: an agent asks to start a Jupyter kernel for ${label(notebook)}. Pick one in the list VS Code shows (Escape: none).`,
      vscode.commands.executeCommand<string | undefined>('jupyter.kernel.selectLocalKernelSpec', notebook),
    );
    if (!picked)
      throw new BridgeError(
        'conflict',
        `The person picked no Jupyter kernel for ${label(notebook)}: ${JUPYTER_SOURCE.noKernelHint}`,
      );
    // The list is a kernel source of VS Code's picker, which selects what it returns: so do we.
    await vscode.commands.executeCommand('notebook.selectKernel', {
      notebookEditor: editor,
      id: picked,
      extension: JUPYTER_SOURCE.extensionId,
    });
    if (!(await this.startWithCell(notebook, START_TIMEOUT_MS)))
      throw new BridgeError(
        'kernel_timeout',
        `The Jupyter kernel ${picked} of ${label(notebook)} did not start within ${START_TIMEOUT_MS / 1000} s`,
      );
    this.log.info(`started the Jupyter kernel ${picked} for ${label(notebook)}`);
    this.changed.fire();
  }

  private whenIdleAgain(kernel: ApiKernel, notebook: vscode.NotebookDocument): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let left = false;
      const timer = setTimeout(() => {
        sub?.dispose();
        reject(
          new BridgeError(
            'kernel_timeout',
            `The Jupyter kernel of ${label(notebook)} did not restart within ${START_TIMEOUT_MS / 1000} s (VS Code asks the person to confirm a restart unless jupyter.askForKernelRestart is off)`,
          ),
        );
      }, START_TIMEOUT_MS);
      const sub = kernel.onDidChangeStatus?.((status) => {
        if (status !== 'idle' && status !== 'busy') left = true;
        else if (left && status === 'idle') {
          clearTimeout(timer);
          sub?.dispose();
          resolve();
        }
      });
      if (!sub) {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  /** After a restart or a death the kernel is re-checked on its next change. */
  private watch(notebook: vscode.NotebookDocument, kernel: ApiKernel): void {
    if (this.running.has(notebook)) return;
    this.running.add(notebook);
    this.changed.fire();
    const sub = kernel.onDidChangeStatus?.((status) => {
      if (JUPYTER_STATES[status] !== 'idle' && JUPYTER_STATES[status] !== 'busy') this.startedAt.set(notebook, Date.now());
      if (status === 'dead' || status === 'terminating') {
        this.running.delete(notebook);
        sub?.dispose();
        this.changed.fire();
      }
    });
    if (sub) this.disposables.push(sub);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

const NOT_READY = new Set(['unknown', 'starting', 'restarting', 'autorestarting']);

/** The Jupyter API's kernel statuses as the bridge names them. */
const JUPYTER_STATES: Record<string, KernelState> = {
  unknown: 'unknown',
  starting: 'starting',
  idle: 'idle',
  busy: 'busy',
  restarting: 'restarting',
  autorestarting: 'restarting',
  terminating: 'dead',
  dead: 'dead',
};

/**
 * Waits while the kernel is still connecting (a kernel on a Jupyter Server is handed out before
 * its connection is up, and refuses code meanwhile); false when the request went away first.
 */
function ready(kernel: ApiKernel, signal: AbortSignal): Promise<boolean> {
  if (!kernel.status || !NOT_READY.has(kernel.status) || !kernel.onDidChangeStatus) return Promise.resolve(!signal.aborted);
  const onDidChangeStatus = kernel.onDidChangeStatus;
  return new Promise<boolean>((resolve) => {
    const done = (value: boolean) => {
      clearTimeout(timer);
      sub.dispose();
      signal.removeEventListener('abort', abort);
      resolve(value);
    };
    const abort = () => done(false);
    // Past this, the run itself reports what is wrong.
    const timer = setTimeout(() => done(true), START_TIMEOUT_MS);
    const sub = onDidChangeStatus((status) => !NOT_READY.has(status) && done(true));
    signal.addEventListener('abort', abort, { once: true });
    if (!NOT_READY.has(kernel.status!)) done(true); // it changed before we listened
  });
}
