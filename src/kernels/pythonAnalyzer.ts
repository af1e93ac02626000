import type { CellAnalysis, CodeAnalyzer } from '../core/model/codeChecks';
import type { Kernel } from '../core/model/kernelPort';
import type { Log } from '../core/log';
import type { KernelCommand } from './builtin/kernelCommand';
import { INSPECT_MARKER, parseInspectOutput } from '../core/runs/variables';
import { KeptProcess, type KeptProcessOptions } from './keptProcess';

/**
 * Analyses kept, by code (the analysis of a text never changes): at most this many characters of
 * code and names together (about 32 MB), the oldest let go first. A cell's text is under the body
 * limit each, so a count alone would let a few thousand large cells take gigabytes.
 */
const CACHED_CHARS = 16 * 1024 * 1024;

/** Peak memory (KiB) past which the kept kernel_inspect.py exits after its answer, for the next query to start another. */
const MAX_RSS_KB = 256 * 1024;

/** Cells named per text kept: the analyses handed out are the same objects each time (cellGraph.ts keeps what it made of them). */
const NAMED_PER_TEXT = 8;

type Analysis = Omit<CellAnalysis, 'id'>;

interface Kept {
  readonly analysis: Analysis;
  readonly chars: number;
  /** The analysis as handed out, by cell id. */
  readonly named: Map<string, CellAnalysis>;
}

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
  /** The kept Python's bounds (keptProcess.ts): its idle time, its memory (KiB). */
  process?: Pick<KeptProcessOptions, 'idleMs'> & { maxRssKb?: number };
}

/**
 * Python's own compiler and symbol tables for the cells of a notebook (the extension host has
 * no Python parser): the notebook's running builtin kernel answers, else `python kernel_inspect.py
 * --serve`, kept running while it is used (keptProcess.ts), in the kernel's sandbox when that
 * is on (the Python is the kernel's, whose files a sandboxed run may have changed). Only the cells
 * whose text has no analysis kept are sent: an edit sends one. IPython syntax is accepted where
 * IPython is importable.
 */
export class PythonAnalyzer implements CodeAnalyzer {
  private readonly cache = new Map<string, Kept>();
  private cachedChars = 0;
  private readonly process: KeptProcess;

  constructor(private readonly options: PythonAnalyzerOptions) {
    const { maxRssKb = MAX_RSS_KB, ...bounds } = options.process ?? {};
    this.process = new KeptProcess({
      what: 'the Python code check',
      command: () => {
        const argv = [options.python(), options.script, '--serve', String(maxRssKb)];
        return options.wrap?.(argv, process.env) ?? { command: argv[0]!, args: argv.slice(1) };
      },
      answers: (line) => line.includes(INSPECT_MARKER),
      log: options.log,
      ...bounds,
    });
  }

  /** The kept kernel_inspect.py's answer to `query`; undefined when none came. */
  private async inspect(query: object): Promise<unknown> {
    const line = await this.process.ask(JSON.stringify(query));
    return line === undefined ? undefined : parseInspectOutput(line);
  }

  /** Stops the kept Python. */
  dispose(): void {
    this.process.dispose();
  }

  async analyze(notebookUri: string, cells: readonly { id: string; code: string }[]): Promise<CellAnalysis[] | undefined> {
    const known = new Map<string, Kept>();
    for (const { code } of cells) {
      const hit = this.cache.get(code);
      if (hit) known.set(code, hit);
    }
    const missing = [...new Set(cells.map((c) => c.code).filter((code) => !known.has(code)))];
    if (missing.length) {
      const query = { kind: 'analyze' as const, cells: missing.map((code, i) => ({ id: String(i), code })), ipython: true };
      // The kernel may answer without cells (its inspector is stuck): the subprocess answers then.
      const analysed = cellsOf(await this.fromKernel(notebookUri, query)) ?? cellsOf(await this.inspect(query));
      if (!analysed) return undefined;
      for (const { id, ...analysis } of analysed) known.set(missing[Number(id)]!, this.keep(missing[Number(id)]!, analysis));
    }
    return cells.map((c) => named(known.get(c.code), c.id));
  }

  /** Keeps `analysis` as the newest entry, letting the oldest go past CACHED_CHARS (a text over it is not kept). */
  private keep(code: string, analysis: Analysis): Kept {
    this.forget(code);
    const kept = { analysis, chars: code.length + JSON.stringify(analysis).length, named: new Map() };
    if (kept.chars > CACHED_CHARS) return kept;
    this.cache.set(code, kept);
    this.cachedChars += kept.chars;
    while (this.cachedChars > CACHED_CHARS) this.forget(this.cache.keys().next().value!);
    return kept;
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
}

/** `kept`'s analysis for cell `id`: the object handed out for it before, while there is one. */
function named(kept: Kept | undefined, id: string): CellAnalysis {
  if (!kept) return { id };
  let analysis = kept.named.get(id);
  if (!analysis) {
    analysis = { id, ...kept.analysis };
    kept.named.set(id, analysis);
    if (kept.named.size > NAMED_PER_TEXT) kept.named.delete(kept.named.keys().next().value!);
  }
  return analysis;
}

function cellsOf(answer: unknown): CellAnalysis[] | undefined {
  const cells = (answer as { cells?: unknown } | undefined)?.cells;
  return Array.isArray(cells) ? (cells as CellAnalysis[]) : undefined;
}
