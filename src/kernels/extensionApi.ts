import type { Kernels as JupyterKernelsApi, Kernel as JupyterApiKernel } from '@vscode/jupyter-extension';
import * as vscode from 'vscode';
import { BridgeError } from '../core/errors';
import { interpretOutput, reduceDisplay, type StreamMimes } from '../core/extensionOutputs';
import {
  NO_OUTPUT,
  reduceMimeBundle,
  type ExecResult,
  type InterruptHow,
  type Kernel,
  type MimeBundle,
  type StreamEvent,
} from '../core/kernel';
import { KernelUnavailable, type KernelProvider } from './kernel';

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
  extensionId: string;
  notebookType: string;
  kernels(exports: unknown): KernelsApi | undefined;
  /** What the person must do when no kernel is running for the notebook. */
  noKernelHint: string;
  /** How the person grants access after refusing it. */
  accessHint: string;
}

function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}
function asKernelsApi(value: unknown): KernelsApi | undefined {
  return typeof field(value, 'getKernel') === 'function' ? (value as KernelsApi) : undefined;
}

export const MARIMO_SOURCE: ExtensionKernelSource = {
  name: 'marimo',
  label: 'marimo',
  extensionId: 'marimo-team.vscode-marimo',
  notebookType: 'marimo-notebook',
  kernels: (exports) => asKernelsApi(field(field(exports, 'experimental'), 'kernels')),
  noKernelHint: 'select a marimo kernel for the notebook (the kernel picker at the top right) and run a cell once',
  accessHint: 'allow "Agent Bridge" when VS Code asks, then retry',
};

export const JUPYTER_SOURCE: ExtensionKernelSource = {
  name: 'jupyter',
  label: 'Jupyter',
  extensionId: 'ms-toolsai.jupyter',
  notebookType: 'jupyter-notebook',
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
  /** The kernel's tracebacks may carry HTML markup (marimo's do), to strip for a terminal. */
  markupInErrors?: boolean;
  /** When executeCode throws before any output, may it be a refusal the person can undo? (false: admit settled that) */
  accessHintOnError?: boolean;
  /**
   * Runs before the code is sent: false when it must not be sent (the person refused, or the
   * request was abandoned meanwhile), having said why on the stream.
   */
  admit(onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<boolean>;
}

const MARIMO_RULES: ScratchpadRules = {
  wrap: (code) => code,
  admit: async () => true,
  markupInErrors: true,
  accessHintOnError: true,
};

/**
 * Reaches the kernels of another notebook extension through its exported API. Asked per
 * request, so a kernel the person picks in the editor is used at once. Interrupt and restart
 * are not offered by the API: the editor's own cancel command stops runs.
 */
export class ExtensionKernels implements KernelProvider {
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
    const extension = vscode.extensions.getExtension(source.extensionId);
    if (!extension) return undefined;
    if (!extension.isActive) {
      return new KernelUnavailable(503, `The ${source.label} extension is not active yet: ${source.noKernelHint}, then retry`);
    }
    const api = source.kernels(extension.exports);
    if (!api) {
      return new KernelUnavailable(
        503,
        `This version of the ${source.label} extension (${source.extensionId}) exports no kernels API: update it`,
      );
    }
    let kernel: ApiKernel | undefined;
    try {
      kernel = await api.getKernel(notebook.uri);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return new KernelUnavailable(
        409,
        `The ${source.label} extension refused access to its kernel (${reason}): ${source.accessHint}`,
      );
    }
    return kernel ?? new KernelUnavailable(409, `No ${source.label} kernel is running for this notebook: ${source.noKernelHint}`);
  }

  protected adapt(_notebook: vscode.NotebookDocument, kernel: ApiKernel): Kernel | KernelUnavailable {
    return new ApiKernelAdapter(this.source, kernel, MARIMO_RULES);
  }

  async interrupt(_notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined> {
    return undefined;
  }

  async restart(_notebook: vscode.NotebookDocument): Promise<boolean> {
    return false;
  }

  async start(_editor: vscode.NotebookEditor): Promise<void> {
    throw new BridgeError(409, `The bridge cannot start ${this.source.label} kernels: ${this.source.noKernelHint}`);
  }
}

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
    let failed = false;
    let produced = false;
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
        interpreted.streams.forEach(onStream);
        failed ||= interpreted.failed;
        if (interpreted.value) value = interpreted.value;
        if (interpreted.display) display = interpreted.display;
      }
    } catch (error) {
      // After an error output the extension also throws its message: the traceback said it already.
      if (!signal.aborted && !failed) {
        const message = error instanceof Error ? error.message : String(error);
        const hint =
          produced || !this.rules.accessHintOnError
            ? ''
            : ` (if the ${this.source.label} extension refused access: ${this.source.accessHint})`;
        onStream({ name: 'stderr', text: `${message}${hint}\n` });
      }
      failed = true;
    } finally {
      cancellation.dispose();
    }
    if (signal.aborted) failed = true;
    if (failed) return { success: false, status: signal.aborted ? 'interrupted' : 'failed', output: NO_OUTPUT };
    if (value) return { success: true, status: 'succeeded', output: reduceMimeBundle(value) };
    return { success: true, status: 'succeeded', output: (display && reduceDisplay(display)) ?? NO_OUTPUT };
  }
}
