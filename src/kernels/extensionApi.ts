import type { Kernels as JupyterKernelsApi, Kernel as JupyterApiKernel } from '@vscode/jupyter-extension';
import * as vscode from 'vscode';
import { interpretOutput, reduceDisplay, type StreamMimes } from '../core/outputs/extensionOutputs';
import { ConsoleLines } from '../core/outputs/consoleLines';
import {
  NO_OUTPUT,
  reduceMimeBundle,
  type ExecResult,
  type InterruptHow,
  type Kernel,
  type KernelStatus,
  type MimeBundle,
  type StreamEvent,
} from '../core/model/kernelPort';
import { KernelUnavailable, type KernelProvider } from './kernelProvider';
import { errorMessage } from '../core/errorMessage';
import { sleep } from '../core/sleep';

/**
 * The kernel shape both the marimo and the Jupyter extension export (protocol.md §7): the
 * Jupyter extension's published API types, of which marimo implements `executeCode`.
 */
export type ApiKernel = Pick<JupyterApiKernel, 'executeCode'> & Partial<Omit<JupyterApiKernel, 'executeCode'>>;
type KernelsApi = { getKernel(uri: vscode.Uri): Thenable<ApiKernel | undefined> | ApiKernel | undefined } & Partial<
  Omit<JupyterKernelsApi, 'getKernel'>
>;

export interface ExtensionKernelSource {
  name: string;
  label: string;
  /** The extension's id as its publisher ships it (named in answers). */
  extensionId: string;
  notebookType: string;
  /** The installed extension that serves `notebookType` with this API, if any. */
  extension(): vscode.Extension<unknown> | undefined;
  kernels(exports: unknown): KernelsApi | undefined;
  /** What the person must do when no kernel is running for the notebook. */
  noKernelHint: string;
  /** How the person grants access after refusing it; undefined: the extension never asks. */
  accessHint?: string;
}

export function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}
export function asKernelsApi(value: unknown): KernelsApi | undefined {
  return typeof field(value, 'getKernel') === 'function' ? (value as KernelsApi) : undefined;
}

export const JUPYTER_SOURCE: ExtensionKernelSource = {
  name: 'jupyter',
  label: 'Jupyter',
  extensionId: 'ms-toolsai.jupyter',
  notebookType: 'jupyter-notebook',
  extension: () => vscode.extensions.getExtension('ms-toolsai.jupyter'),
  kernels: (exports) => asKernelsApi(field(exports, 'kernels')),
  noKernelHint:
    'select a Jupyter kernel for the notebook and run a cell once, or start it with POST /notebooks/kernel/start ' +
    '(MCP start_kernel) (or select "Agent Bridge Python")',
  accessHint:
    'the person allows "Agent Bridge" with the command "Jupyter: Manage Access To Jupyter Kernels" (or in the dialog VS Code shows)',
};

/** How an adapter runs one scratchpad request in an API kernel; the defaults pass the code through. */
export interface ScratchpadRules {
  /** What is sent to executeCode for the agent's code. */
  wrap(code: string): string;
  /** Marks the bundle that is the run's value (others are displays); undefined: every bundle is the value. */
  valueMime?: string;
  /** The kernel's tracebacks link their frames with HTML anchors (marimo's extension does), unwrapped for a terminal. */
  linksInErrors?: boolean;
  /**
   * What to add on stderr when the run failed (the bridge's way to do what the code tried), from
   * the code and the end of what it wrote on stderr; undefined: nothing.
   */
  failureHint?(code: string, stderr: string): string | undefined;
  /** When executeCode throws before any output, may it be a refusal the person can undo? (false: admit settled that) */
  accessHintOnError?: boolean;
  /**
   * Runs before the code is sent: false when it must not be sent (the person refused, or the
   * request was abandoned meanwhile), having said why on the stream.
   */
  admit(onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<boolean>;
}

/**
 * Reaches the kernels of another notebook extension through its exported API. Asked per
 * request, so a kernel the person picks in the editor is used at once. The API offers neither
 * interrupt nor restart: each extension's provider does them through that extension's commands.
 */
export abstract class ExtensionKernels implements KernelProvider {
  readonly name: string;
  readonly onDidChange: vscode.Event<void>;

  constructor(protected readonly source: ExtensionKernelSource) {
    this.name = source.name;
    // Another extension's kernels come and go without telling us; listing re-asks each time.
    this.onDidChange = vscode.extensions.onDidChange;
  }

  async kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable | undefined> {
    const found = await this.apiKernel(notebook);
    return found && !(found instanceof KernelUnavailable) ? this.adapt(notebook, found) : found;
  }

  /** The extension's kernel for the notebook, or why there is none; undefined when not ours. */
  protected async apiKernel(notebook: vscode.NotebookDocument): Promise<ApiKernel | KernelUnavailable | undefined> {
    const { source } = this;
    if (notebook.notebookType !== source.notebookType) return undefined;
    const extension = source.extension();
    if (!extension) return undefined;
    if (!extension.isActive) {
      return new KernelUnavailable(
        'unavailable',
        `The ${source.label} extension is not active yet: ${source.noKernelHint}, then retry`,
      );
    }
    const api = source.kernels(extension.exports);
    if (!api) {
      return new KernelUnavailable(
        'unavailable',
        `This version of the ${source.label} extension (${extension.id}) exports no kernels API: update it`,
      );
    }
    let kernel: ApiKernel | undefined;
    try {
      kernel = await api.getKernel(notebook.uri);
    } catch (error) {
      const reason = errorMessage(error);
      return new KernelUnavailable(
        'conflict',
        source.accessHint
          ? `The ${source.label} extension refused access to its kernel (${reason}): ${source.accessHint}`
          : `The ${source.label} extension could not give its kernel (${reason}): ${source.noKernelHint}`,
      );
    }
    return (
      kernel ??
      new KernelUnavailable('conflict', `No ${source.label} kernel is running for this notebook: ${source.noKernelHint}`)
    );
  }

  /**
   * The Jupyter and marimo extensions start a notebook's kernel only to run a cell (no command or
   * API starts it), and hand out only kernels started that way: run a comment-only cell appended
   * for the moment, then remove it (two undoable edits; no output; the kernel's history gets that
   * one comment). VS Code does not send an empty cell to the kernel. With no kernel selected, VS
   * Code selects the only one there is, or shows its kernel picker to the person.
   */
  protected async startWithCell(notebook: vscode.NotebookDocument, timeoutMs: number, language = 'python'): Promise<boolean> {
    const index = notebook.cellCount;
    const add = new vscode.WorkspaceEdit();
    add.set(notebook.uri, [
      vscode.NotebookEdit.insertCells(index, [new vscode.NotebookCellData(vscode.NotebookCellKind.Code, STARTER, language)]),
    ]);
    if (!(await vscode.workspace.applyEdit(add))) return false;
    const added = notebook.cellAt(index);
    try {
      void vscode.commands.executeCommand('notebook.cell.execute', {
        ranges: [{ start: index, end: index + 1 }],
        document: notebook.uri,
      });
      if (!(await this.waitForKernel(notebook, timeoutMs))) return false;
      // marimo hands out its kernel on selection, before the cell ran: removing a cell that is
      // still queued would fail its run, so let it end first (a comment ends at once).
      for (const end = Date.now() + STARTER_END_MS; Date.now() < end && added.executionSummary?.success === undefined;)
        await sleep(100);
      return true;
    } finally {
      const now = notebook.getCells().indexOf(added);
      if (now >= 0 && added.document.getText() === STARTER) {
        const remove = new vscode.WorkspaceEdit();
        remove.set(notebook.uri, [vscode.NotebookEdit.deleteCells(new vscode.NotebookRange(now, now + 1))]);
        await vscode.workspace.applyEdit(remove);
      }
    }
  }

  /** Polls until the extension gives the notebook's kernel; false past `timeoutMs`. */
  protected async waitForKernel(notebook: vscode.NotebookDocument, timeoutMs: number): Promise<boolean> {
    for (const end = Date.now() + timeoutMs; Date.now() < end; await sleep(250)) {
      if (!((await this.apiKernel(notebook)) instanceof KernelUnavailable)) return true;
    }
    return false;
  }

  protected abstract adapt(notebook: vscode.NotebookDocument, kernel: ApiKernel): Kernel | KernelUnavailable;
  abstract interrupt(notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined>;
  abstract restart(notebook: vscode.NotebookDocument): Promise<boolean>;
  abstract start(editor: vscode.NotebookEditor): Promise<void>;
}

/** The notebook as the person knows it: its path, else its uri. */
export function label(notebook: vscode.NotebookDocument): string {
  return notebook.uri.scheme === 'file' ? notebook.uri.fsPath : notebook.uri.toString();
}

/** Shows a notification of ours while `task` runs (the person sees who asks and why). */
export function withNotice<T>(title: string, task: Thenable<T>): Promise<T> {
  return Promise.resolve(vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title }, () => task));
}

/** The cell the bridge runs to start a kernel (see startWithCell). */
const STARTER = '# Agent Bridge: starting the kernel';
/** How long the starter cell's run may take to end once the kernel is there. */
const STARTER_END_MS = 15_000;

/** Characters of a run's stderr kept for ScratchpadRules.failureHint (a traceback's last lines). */
const STDERR_KEPT = 4000;

const streamMimes = (): StreamMimes => ({
  stdout: vscode.NotebookCellOutputItem.stdout('').mime,
  stderr: vscode.NotebookCellOutputItem.stderr('').mime,
  error: vscode.NotebookCellOutputItem.error(new Error()).mime,
});

/** An extension's kernel as a bridge Kernel: outputs mapped onto the scratchpad stream. */
export class ApiKernelAdapter implements Kernel {
  readonly kind: string;

  constructor(
    private readonly source: ExtensionKernelSource,
    private readonly kernel: ApiKernel,
    private readonly rules: ScratchpadRules,
    /** Where the kernel is, as the extension tells it. */
    readonly status: () => KernelStatus,
  ) {
    this.kind = source.name;
  }

  async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
    if (!(await this.rules.admit(onStream, signal)))
      return { success: false, status: signal.aborted ? 'interrupted' : 'failed', output: NO_OUTPUT };
    const cancellation = new vscode.CancellationTokenSource();
    // A kernel that ignores cancellation must not hold the session's queue: stop waiting for it.
    const aborted = new Promise<'aborted'>((resolve) => {
      const onAbort = () => {
        cancellation.cancel();
        resolve('aborted');
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    const mimes = streamMimes();
    const lines = new ConsoleLines(onStream);
    let failed = false;
    let produced = false;
    /** The end of what the run wrote on stderr, for failureHint. */
    let stderr = '';
    let value: MimeBundle | undefined;
    let display: MimeBundle | undefined;
    const outputs = this.kernel.executeCode(this.rules.wrap(code), cancellation.token)[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await Promise.race([outputs.next(), aborted]);
        if (next === 'aborted') {
          void outputs.return?.().catch(() => undefined);
          break;
        }
        if (next.done) break;
        produced = true;
        const interpreted = interpretOutput(next.value, mimes, this.rules);
        for (const s of interpreted.streams)
          if (s.block) lines.block(s.name, s.text);
          else lines.text(s);
        for (const s of interpreted.streams) if (s.name === 'stderr') stderr = (stderr + s.text).slice(-STDERR_KEPT);
        failed ||= interpreted.failed;
        if (interpreted.value) value = interpreted.value;
        if (interpreted.display) display = interpreted.display;
      }
    } catch (error) {
      // After an error output the extension also throws its message: the traceback said it already.
      if (!signal.aborted && !failed) {
        const message = errorMessage(error);
        const hint =
          produced || !this.rules.accessHintOnError || !this.source.accessHint
            ? ''
            : ` (if the ${this.source.label} extension refused access: ${this.source.accessHint})`;
        lines.block('stderr', `${message}${hint}`);
      }
      failed = true;
    } finally {
      cancellation.dispose();
    }
    if (signal.aborted) failed = true;
    const hint = failed && !signal.aborted ? this.rules.failureHint?.(code, stderr) : undefined;
    if (hint) lines.block('stderr', hint);
    if (failed) return { success: false, status: signal.aborted ? 'interrupted' : 'failed', output: NO_OUTPUT };
    if (value) return { success: true, status: 'succeeded', output: reduceMimeBundle(value) };
    return { success: true, status: 'succeeded', output: (display && reduceDisplay(display)) ?? NO_OUTPUT };
  }
}
