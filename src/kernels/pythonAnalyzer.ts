import type { Readable, Writable } from 'node:stream';
import type { CellAnalysis, CodeAnalyzer } from '../core/codeChecks';
import type { Kernel } from '../core/kernelPort';
import type { Log } from '../core/log';
import { INSPECT_MARKER, parseInspectOutput } from '../core/variables';
import { spawnCommand, type KernelCommand } from './builtin/kernelCommand';

/** Analyses kept, by code (the analysis of a text never changes). */
const CACHED = 2000;
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
  private readonly cache = new Map<string, Analysis>();

  constructor(private readonly options: PythonAnalyzerOptions) {}

  async analyze(notebookUri: string, cells: readonly { id: string; code: string }[]): Promise<CellAnalysis[] | undefined> {
    const missing = [...new Set(cells.map((c) => c.code).filter((code) => !this.cache.has(code)))];
    if (missing.length) {
      const query = { kind: 'analyze' as const, cells: missing.map((code, i) => ({ id: String(i), code })), ipython: true };
      const answer = (await this.fromKernel(notebookUri, query)) ?? (await this.fromSubprocess(query));
      const analysed = (answer as { cells?: (CellAnalysis & { id: string })[] } | undefined)?.cells;
      if (!Array.isArray(analysed)) return undefined;
      for (const { id, ...analysis } of analysed) {
        this.cache.delete(missing[Number(id)]!);
        this.cache.set(missing[Number(id)]!, analysis);
      }
      while (this.cache.size > CACHED) this.cache.delete(this.cache.keys().next().value!);
    }
    return cells.map((c) => ({ id: c.id, ...this.cache.get(c.code) }));
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
