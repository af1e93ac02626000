import * as vscode from 'vscode';
import { BridgeError } from '../core/errors';
import type { Kernel } from '../core/kernel';
import type { Log } from '../core/log';
import { ApiKernelAdapter, ExtensionKernels, JUPYTER_SOURCE, type ApiKernel } from './extensionApi';
import { JupyterAccess, refusal } from './jupyterAccess';
import { findKernelSpecControllerIds, kernelSpecName } from './jupyterKernelSpecs';
import { KernelUnavailable } from './kernel';
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
    if (await this.access.refused(found)) return new KernelUnavailable(403, refusal(label(notebook)));
    return this.adapt(notebook, found);
  }

  protected override adapt(notebook: vscode.NotebookDocument, kernel: ApiKernel): Kernel {
    const language = kernel.language ?? 'python';
    const python = language.toLowerCase() === 'python';
    const adapter = new ApiKernelAdapter(JUPYTER_SOURCE, kernel, {
      wrap: python ? wrapPythonScratchpad : (code) => code,
      ...(python ? { valueMime: VALUE_MIME } : {}),
      admit: (onStream, signal) => this.access.admit(kernel, label(notebook), onStream, signal),
    });
    return python ? adapter : Object.assign(adapter, { kind: `jupyter:${language}` });
  }

  override async interrupt(notebook: vscode.NotebookDocument): Promise<boolean> {
    const kernel = await this.apiKernel(notebook);
    if (!kernel || kernel instanceof KernelUnavailable) return false;
    await vscode.commands.executeCommand('jupyter.interruptkernel', { notebookEditor: { notebookUri: notebook.uri } });
    return true;
  }

  override async restart(notebook: vscode.NotebookDocument): Promise<boolean> {
    const kernel = await this.apiKernel(notebook);
    if (!kernel || kernel instanceof KernelUnavailable) return false;
    // The command returns before the restart is done: wait for the kernel to come back idle.
    const back = this.whenIdleAgain(kernel, notebook);
    await vscode.commands.executeCommand('jupyter.restartkernel', notebook.uri);
    await back;
    return true;
  }

  override async start(editor: vscode.NotebookEditor): Promise<void> {
    const notebook = editor.notebook;
    if (notebook.notebookType !== JUPYTER_SOURCE.notebookType)
      throw new BridgeError(
        400,
        `Jupyter kernels run .ipynb (jupyter-notebook) notebooks; ${label(notebook)} is a ${notebook.notebookType}`,
      );
    const extension = vscode.extensions.getExtension(JUPYTER_SOURCE.extensionId);
    if (!extension) throw new BridgeError(409, 'The Jupyter extension (ms-toolsai.jupyter) is not installed in this VS Code');
    await extension.activate();
    if (!((await this.apiKernel(notebook)) instanceof KernelUnavailable)) return;
    const ids = findKernelSpecControllerIds(notebook);
    if (!ids.length)
      throw new BridgeError(
        409,
        `No Jupyter kernelspec found for ${label(notebook)} (its metadata names ${JSON.stringify(kernelSpecName(notebook))}): ` +
          'install one (for Python: ipykernel) or select a kernel in the kernel picker',
      );
    for (const id of ids) {
      await vscode.commands.executeCommand('notebook.selectKernel', {
        notebookEditor: editor,
        id,
        extension: JUPYTER_SOURCE.extensionId,
      });
      // Jupyter counts a kernel as the person's own once started with its UI: a restart is that.
      await vscode.commands.executeCommand('jupyter.restartkernel', notebook.uri);
      const started = await this.waitForKernel(notebook, 15_000);
      if (started) {
        this.log.info(`started the Jupyter kernel ${id} for ${label(notebook)}`);
        this.changed.fire();
        return;
      }
    }
    throw new BridgeError(
      409,
      `Could not start a Jupyter kernel for ${label(notebook)} (tried ${ids.join(', ')}): select one in the kernel picker and run a cell`,
    );
  }

  private async waitForKernel(notebook: vscode.NotebookDocument, timeoutMs: number): Promise<boolean> {
    for (const end = Date.now() + timeoutMs; Date.now() < end; await sleep(250)) {
      if (!((await this.apiKernel(notebook)) instanceof KernelUnavailable)) return true;
    }
    return false;
  }

  private whenIdleAgain(kernel: ApiKernel, notebook: vscode.NotebookDocument): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let left = false;
      const timer = setTimeout(() => {
        sub?.dispose();
        reject(
          new BridgeError(
            504,
            `The Jupyter kernel of ${label(notebook)} did not come back within ${START_TIMEOUT_MS / 1000} s of the restart`,
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

function label(notebook: vscode.NotebookDocument): string {
  return notebook.uri.scheme === 'file' ? notebook.uri.fsPath : notebook.uri.toString();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
