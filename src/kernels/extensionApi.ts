import * as vscode from 'vscode';
import { interpretOutput, type ApiOutput, type StreamMimes } from '../core/extensionOutputs';
import { NO_OUTPUT, reduceMimeBundle, type ExecResult, type Kernel, type MimeBundle, type StreamEvent } from '../core/kernel';
import { KernelUnavailable, type KernelProvider } from './kernel';

/** The kernel shape both the marimo and the Jupyter extension export (protocol.md §7). */
interface ApiKernel {
  executeCode(code: string, token: vscode.CancellationToken): AsyncIterable<ApiOutput>;
}
interface KernelsApi {
  getKernel(uri: vscode.Uri): Thenable<ApiKernel | undefined> | ApiKernel | undefined;
}

interface ExtensionKernelSource {
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

/** Which extension serves which notebook type, and where its kernels API hangs. */
export const EXTENSION_KERNEL_SOURCES: readonly ExtensionKernelSource[] = [
  {
    name: 'marimo',
    label: 'marimo',
    extensionId: 'marimo-team.vscode-marimo',
    notebookType: 'marimo-notebook',
    kernels: (exports) => asKernelsApi(field(field(exports, 'experimental'), 'kernels')),
    noKernelHint: 'select a marimo kernel for the notebook (the kernel picker at the top right) and run a cell once',
    accessHint: 'allow "Agent Bridge" when VS Code asks, then retry',
  },
  {
    name: 'jupyter',
    label: 'Jupyter',
    extensionId: 'ms-toolsai.jupyter',
    notebookType: 'jupyter-notebook',
    kernels: (exports) => asKernelsApi(field(exports, 'kernels')),
    noKernelHint: 'select a Jupyter kernel for the notebook and run a cell once (or select "Agent Bridge Python")',
    accessHint: 'allow "Agent Bridge" when VS Code asks, or with the command "Jupyter: Manage Access To Jupyter Kernels"',
  },
];

/**
 * Reaches the kernels of another notebook extension through its exported API. Asked per
 * request, so a kernel the person picks in the editor is used at once.
 */
export class ExtensionKernels implements KernelProvider {
  readonly name: string;
  readonly onDidChange: vscode.Event<void>;

  constructor(private readonly source: ExtensionKernelSource) {
    this.name = source.name;
    // Another extension's kernels come and go without telling us; listing re-asks each time.
    this.onDidChange = vscode.extensions.onDidChange;
  }

  async kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable | undefined> {
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
    if (!kernel)
      return new KernelUnavailable(409, `No ${source.label} kernel is running for this notebook: ${source.noKernelHint}`);
    return new ApiKernelAdapter(source, kernel);
  }
}

const streamMimes = (): StreamMimes => ({
  stdout: vscode.NotebookCellOutputItem.stdout('').mime,
  stderr: vscode.NotebookCellOutputItem.stderr('').mime,
  error: vscode.NotebookCellOutputItem.error(new Error()).mime,
});

/** An extension's kernel as a bridge Kernel: outputs mapped onto the scratchpad stream. */
class ApiKernelAdapter implements Kernel {
  readonly kind: string;

  constructor(
    private readonly source: ExtensionKernelSource,
    private readonly kernel: ApiKernel,
  ) {
    this.kind = source.name;
  }

  async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
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
    const outputs = this.kernel.executeCode(code, cancellation.token)[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await Promise.race([outputs.next(), aborted]);
        if (next === 'aborted') {
          void outputs.return?.().catch(() => undefined);
          break;
        }
        if (next.done) break;
        produced = true;
        const interpreted = interpretOutput(next.value, mimes);
        interpreted.streams.forEach(onStream);
        failed ||= interpreted.failed;
        if (interpreted.value) value = interpreted.value;
      }
    } catch (error) {
      if (!signal.aborted) {
        const message = error instanceof Error ? error.message : String(error);
        // Jupyter asks for consent inside executeCode: a refusal surfaces here, before any output.
        const hint = produced ? '' : ` (if the ${this.source.label} extension refused access: ${this.source.accessHint})`;
        onStream({ name: 'stderr', text: `${message}${hint}\n` });
      }
      failed = true;
    } finally {
      cancellation.dispose();
    }
    if (signal.aborted) failed = true;
    return failed
      ? { success: false, status: signal.aborted ? 'interrupted' : 'failed', output: NO_OUTPUT }
      : { success: true, status: 'succeeded', output: reduceMimeBundle(value) };
  }
}
