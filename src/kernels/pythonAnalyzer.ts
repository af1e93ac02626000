import type { Readable, Writable } from 'node:stream';
import type { CellAnalysis, CodeAnalyzer } from '../core/model/codeChecks';
import type { Kernel } from '../core/model/kernelPort';
import type { Log } from '../core/log';
import { INSPECT_MARKER, parseInspectOutput } from '../core/runs/variables';
import { spawnCommand, type KernelCommand } from './builtin/kernelCommand';

/**
 * Analyses kept, by code (the analysis of a text never changes): at most this many characters of
 * code and names together (about 32 MB), the oldest let go first. A cell's text is under the body
 * limit each, so a count alone would let a few thousand large cells take gigabytes.
 */
const CACHED_CHARS = 16 * 1024 * 1024;
const SUBPROCESS_TIMEOUT_MS = 20_000;

type Analysis = Omit<CellAnalysis, 'id'>;

export interface PythonAnalyzerOptions {
  /** The Python of the builtin kernel (setting agentBridge.pythonPath). */
  python: () => string;
  /** kernel_inspect.py. */
  script: string;
  /** The notebook's builtin kernel, which answers in-process when it is running; undefined otherwise. */
  builtinKernel: (notebookUri: string) => Promise<Kernel | undefined>;
  /** The program as it starts: in the builtin kernel's sandbox while that is on (its Python is the kernel's). */
  wrap?: (argv: readonly string[], env: NodeJS.ProcessEnv) => KernelCommand | undefined;
  log: Log;
}

/**
 * Python's own compiler and symbol tables for the cells of a notebook (the extension host has
 * no Python parser): the notebook's running builtin kernel answers, else a short-lived
 * `python kernel_inspect.py` does, in the kernel's sandbox when that is on (the Python is the
 * kernel's, whose files a sandboxed run may have changed). IPython syntax is accepted where
 * IPython is importable.
 */
export class PythonAnalyzer implements CodeAnalyzer {
  private readonly cache = new Map<string, { analysis: Analysis; chars: number }>();
  private cachedChars = 0;

  constructor(private readonly options: PythonAnalyzerOptions) {}

  async analyze(notebookUri: string, cells: readonly { id: string; code: string }[]): Promise<CellAnalysis[] | undefined> {
    const known = new Map<string, Analysis>();
    for (const { code } of cells) {
      const hit = this.cache.get(code);
      if (hit) known.set(code, hit.analysis);
    }
    const missing = [...new Set(cells.map((c) => c.code).filter((code) => !known.has(code)))];
    if (missing.length) {
      const query = { kind: 'analyze' as const, cells: missing.map((code, i) => ({ id: String(i), code })), ipython: true };
      // The kernel may answer without cells (its inspector is stuck): the subprocess answers then.
      const analysed = cellsOf(await this.fromKernel(notebookUri, query)) ?? cellsOf(await this.fromSubprocess(query));
      if (!analysed) return undefined;
      for (const { id, ...analysis } of analysed) {
        known.set(missing[Number(id)]!, analysis);
        this.keep(missing[Number(id)]!, analysis);
      }
    }
    return cells.map((c) => ({ id: c.id, ...known.get(c.code) }));
  }

  /** Keeps `analysis` as the newest entry, letting the oldest go past CACHED_CHARS (a text over it is not kept). */
  private keep(code: string, analysis: Analysis): void {
    this.forget(code);
    const chars = code.length + JSON.stringify(analysis).length;
    if (chars > CACHED_CHARS) return;
    this.cache.set(code, { analysis, chars });
    this.cachedChars += chars;
    while (this.cachedChars > CACHED_CHARS) this.forget(this.cache.keys().next().value!);
  }

  private forget(code: string): void {
    const entry = this.cache.get(code);
    if (!entry) return;
    this.cache.delete(code);
    this.cachedChars -= entry.chars;
  }

  private async fromKernel(notebookUri: string, query: object): Promise<unknown> {
    const kernel = await this.options.builtinKernel(notebookUri);
    return kernel?.inspect ? kernel.inspect(query as never).catch(() => undefined) : undefined;
  }

  private fromSubprocess(query: object): Promise<unknown> {
    return new Promise((resolve) => {
      const python = this.options.python();
      const plain = { command: python, args: [this.options.script] };
      const child = spawnCommand(this.options.wrap?.([python, this.options.script], process.env) ?? plain, {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: process.env,
        timeout: SUBPROCESS_TIMEOUT_MS,
      });
      const [input, output, errors] = child.stdio as unknown as [Writable, Readable, Readable];
      let stdout = '';
      let stderr = '';
      output.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      errors.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
      child.on('error', (error) => {
        this.options.log.warn(`the Python code check could not start ${python}: ${error.message}`);
        resolve(undefined);
      });
      child.on('close', () => {
        const answer = stdout.includes(INSPECT_MARKER) ? parseInspectOutput(stdout) : undefined;
        if (answer === undefined) this.options.log.warn(`the Python code check gave no answer: ${stderr.trim()}`);
        resolve(answer);
      });
      input.on('error', () => undefined);
      input.end(JSON.stringify(query));
    });
  }
}

function cellsOf(answer: unknown): CellAnalysis[] | undefined {
  const cells = (answer as { cells?: unknown } | undefined)?.cells;
  return Array.isArray(cells) ? (cells as CellAnalysis[]) : undefined;
}
