/**
 * A kernel's variables, read without running a cell: no cell is created, the execution count
 * and the kernel's history stay as they were. The reading itself is kernel_inspect.py's: the
 * builtin kernel answers it over its protocol beside the runs (`Kernel.inspect`); other Python
 * kernels (Jupyter, marimo) run it as a scratchpad program that binds nothing and prints its
 * answer behind a marker.
 */
import type { CellService } from '../model/cellService';
import { BridgeError } from '../bridgeError';
import type { InspectQuery, Kernel } from '../model/kernelPort';
import type { KeyedQueue } from '../flow/keyedQueue';
import { resolveNotebook } from '../cells/refs';
import { runScratchpad } from './scratchpadRuns';
import type { NotebookHost } from '../model/notebookHost';
import { errorMessage } from '../errorMessage';

/**
 * One variable as listed: each part present only when reading it succeeded in time (each read
 * is stopped past 0.5 s, and a type whose read was that slow is skipped in the next minute's lists).
 */
export interface VariableSummary {
  readonly name: string;
  readonly type: string;
  /** The first 32 dimensions; `shapeDims` when there are more. */
  readonly shape?: number[];
  readonly shapeDims?: number;
  readonly length?: number;
  /** Bytes in memory (a DataFrame's memory_usage, an array's nbytes, else sys.getsizeof). */
  readonly size?: number;
  /** repr(), capped; null when it raised, took too long or was skipped (reprError says which). */
  readonly repr?: string | null;
  readonly reprTruncated?: true;
  readonly reprError?: string;
  readonly lengthError?: string;
  /** Named only: the answer's time budget ran out before it, or the inspector is stuck. */
  readonly skipped?: string;
}

export interface VariableDetail extends VariableSummary {
  /** A DataFrame's columns (the first 200) and their dtypes. */
  readonly columns?: { name: string; dtype: string | null }[];
  readonly columnCount?: number;
}

/** The variables listed; `stuck` when the kernel's inspector is stuck in code that did not stop (the rest are named only). */
export interface VariableList {
  readonly variables: VariableSummary[];
  readonly omitted?: number;
  readonly stuck?: string;
}

/** Marks the line of the scratchpad program's answer (kernel_inspect.py MARKER). */
export const INSPECT_MARKER = '\x1eagent-bridge-inspect:';
/**
 * The marker as it is searched for: without its control character, which marimo's extension
 * drops from scratchpad output (seen with marimo-lsp 0.17.1 and marimo 0.25.2).
 */
const MARKER_TEXT = INSPECT_MARKER.slice(1);

/** How long the scratchpad program may take (it answers within ~4 s; the kernel may be busy first). */
const PROGRAM_TIMEOUT_MS = 30_000;

/**
 * The scratchpad program for `query`: kernel_inspect.py exec'd in a dict of its own, reading the
 * scratchpad's namespace (the notebook's globals). The statement is a call returning None, so
 * IPython's `_` and `Out` are left alone. JSON string literals are Python string literals too.
 */
export function inspectProgram(source: string, query: InspectQuery): string {
  return (
    `exec(${JSON.stringify(source)}, {"__builtins__": __builtins__, "__name__": "_agent_bridge_inspect", ` +
    `"_agent_bridge_query": ${JSON.stringify(JSON.stringify(query))}, "_agent_bridge_ns": globals()})`
  );
}

/** The answer the program printed: the last marked line of its stdout. */
export function parseInspectOutput(stdout: string): unknown {
  const at = stdout.lastIndexOf(MARKER_TEXT);
  if (at < 0) return undefined;
  const line = stdout.slice(at + MARKER_TEXT.length).split('\n', 1)[0]!;
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}

/** Kernels whose scratchpad runs Python: the program can read their variables. */
const PYTHON_SCRATCHPADS = new Set(['jupyter', 'marimo']);

export interface InspectDeps {
  readonly runs: KeyedQueue;
  /** kernel_inspect.py's text, for kernels that are not ours. */
  readonly program: () => string;
}

/** Asks `kernel` the query: over its own protocol where it has one, else as a scratchpad program in the session's turn. */
export async function inspectKernel(
  kernel: Kernel,
  sessionId: string,
  query: InspectQuery,
  deps: InspectDeps,
): Promise<Record<string, unknown>> {
  let answer: unknown;
  if (kernel.inspect) {
    answer = await kernel.inspect(query).catch((error: unknown) => {
      throw new BridgeError('conflict', `The ${kernel.kind} kernel could not answer: ${errorMessage(error)}`);
    });
  } else if (PYTHON_SCRATCHPADS.has(kernel.kind)) {
    let stdout = '';
    let stderr = '';
    const timeout = AbortSignal.timeout(PROGRAM_TIMEOUT_MS);
    const result = await runScratchpad(
      deps.runs,
      sessionId,
      kernel,
      inspectProgram(deps.program(), query),
      (event) => {
        if (event.name === 'stdout') stdout += event.text;
        else stderr = (stderr + event.text).slice(-2000);
      },
      timeout,
    );
    answer = result?.success ? parseInspectOutput(stdout) : undefined;
    if (answer === undefined)
      throw new BridgeError(
        timeout.aborted ? 'kernel_timeout' : 'kernel_error',
        timeout.aborted
          ? `The ${kernel.kind} kernel did not answer within ${PROGRAM_TIMEOUT_MS / 1000} s (is a cell still running?)`
          : `The ${kernel.kind} kernel could not read its variables${stderr ? `: ${stderr.trim()}` : ''}`,
      );
  } else {
    throw new BridgeError('conflict', `Variables are read from Python kernels only; this notebook's kernel is ${kernel.kind}`);
  }
  if (typeof answer !== 'object' || answer === null)
    throw new BridgeError('kernel_error', `The ${kernel.kind} kernel gave no answer`);
  const failed = (answer as { failed?: unknown }).failed;
  if (typeof failed === 'string') throw new BridgeError('kernel_timeout', failed);
  return answer as Record<string, unknown>;
}

/** `GET /notebooks/variables`: the kernel's variables, sorted by name. */
export async function listVariables(kernel: Kernel, sessionId: string, deps: InspectDeps): Promise<VariableList> {
  return (await inspectKernel(kernel, sessionId, { kind: 'variables' }, deps)) as unknown as VariableList;
}

/** `GET /notebooks/variables/:name`: one variable in more detail; 404 when the kernel has none of that name. */
export async function inspectVariable(
  kernel: Kernel,
  sessionId: string,
  name: string,
  deps: InspectDeps,
): Promise<{ variable: VariableDetail }> {
  const answer = await inspectKernel(kernel, sessionId, { kind: 'variable', name }, deps);
  if (typeof answer['missing'] === 'string')
    throw new BridgeError('not_found', `The kernel has no variable '${name}': list them with GET /notebooks/variables`);
  return answer as { variable: VariableDetail };
}

/** What the variables routes and tools need of the services. */
export interface VariablesContext {
  readonly cells: Pick<CellService, 'notebooks'>;
  readonly host: Pick<NotebookHost, 'kernelFor'>;
  readonly runs: KeyedQueue;
  readonly inspectProgram: () => string;
}

/** The variables of a notebook's kernel (`name`: one of them, in detail); `notebook` as the cell routes name it. */
export async function notebookVariables(
  ctx: VariablesContext,
  notebook: string | undefined,
  name?: string,
): Promise<VariableList | { variable: VariableDetail }> {
  const { sessionId } = resolveNotebook(await ctx.cells.notebooks(), notebook);
  const kernel = await ctx.host.kernelFor(sessionId);
  const deps = { runs: ctx.runs, program: ctx.inspectProgram };
  return name === undefined ? listVariables(kernel, sessionId, deps) : inspectVariable(kernel, sessionId, name, deps);
}
