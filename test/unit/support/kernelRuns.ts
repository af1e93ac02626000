/** What the builtin-kernel suites share: where kernel.py and the Pythons are, and one run with all it produced. */
import * as path from 'node:path';
import type { CellName, KernelOutput, KernelProcess, KernelRunResult, RunMode } from '../../../src/kernels/builtin/kernelProcess';
import { PythonAnalyzer } from '../../../src/kernels/pythonAnalyzer';

export const SCRIPT = path.resolve(__dirname, '../../../src/kernels/builtin/kernel.py');
/** Another interpreter can be checked with AGENT_BRIDGE_TEST_PYTHON=/path/to/python3.8. */
export const PYTHON = process.env['AGENT_BRIDGE_TEST_PYTHON'] || 'python3';
/** A Python with IPython (Debian's, with python3-ipython, -numpy, -pandas and -matplotlib: `npm run setup` installs them). */
export const IPYTHON_PYTHON = process.env['AGENT_BRIDGE_TEST_IPYTHON_PYTHON'] || '/usr/bin/python3';

/** The code analysis of a notebook without a running builtin kernel: `python kernel_inspect.py`, with IPython. */
export const inspectAnalyzer = () =>
  new PythonAnalyzer({
    python: () => IPYTHON_PYTHON,
    script: path.resolve(__dirname, '../../../src/kernels/builtin/kernel_inspect.py'),
    builtinKernel: async () => undefined,
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });

export type Display = Extract<KernelOutput, { kind: 'display' }>;
export type ErrorOutput = Extract<KernelOutput, { kind: 'error' }>;

/** A run's result with everything it sent, sorted. */
export interface Collected extends KernelRunResult {
  outputs: KernelOutput[];
  stdout: string;
  stderr: string;
  displays: Display[];
  errors: ErrorOutput[];
}

export interface CollectOptions {
  mode?: RunMode;
  signal?: AbortSignal;
  cell?: CellName;
  /** Sees each output as it arrives (to act while the run goes on). */
  onOutput?: (output: KernelOutput) => void;
  /** Called when the run is sent, with a cell run's execution count. */
  onStart?: (executionCount: number | undefined) => void;
}

/** Runs `code` (a cell unless told otherwise) and collects what it printed, displayed and raised. */
export async function collectRun(kernel: KernelProcess, code: string, options: CollectOptions = {}): Promise<Collected> {
  const outputs: KernelOutput[] = [];
  const result = await kernel.run(
    code,
    options.mode ?? 'cell',
    (o) => {
      outputs.push(o);
      options.onOutput?.(o);
    },
    options.signal,
    options.onStart,
    options.cell,
  );
  const text = (name: string) => outputs.map((o) => (o.kind === 'stream' && o.name === name ? o.text : '')).join('');
  return {
    ...result,
    outputs,
    stdout: text('stdout'),
    stderr: text('stderr'),
    displays: outputs.filter((o): o is Display => o.kind === 'display'),
    errors: outputs.filter((o): o is ErrorOutput => o.kind === 'error'),
  };
}
