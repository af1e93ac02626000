import { z } from 'zod';
import { BridgeError } from '../core/bridgeError';
import { HeadTail } from '../core/text/headTail';
import { SCRATCHPAD_OUTPUT_CAP } from '../core/outputs/outputCap';
import { CappedOutput } from '../core/outputs/scratchpadOutputs';
import type { ExecResult, StreamName } from '../core/model/kernelPort';
import { runScratchpad } from '../core/runs/scratchpadRuns';
import type { BridgeServices } from '../core/services';
import type { SessionInfo } from '../core/model/notebookHost';
import { runKind, type Outcome, type OutcomeKind } from '../core/outcome';
import { riskField, type RiskReport } from '../core/model/riskScan';
import { found, tool, type ToolExtra, type ToolRow } from './toolRows';

/** marimo's code-mode tools (`list_sessions`, `execute_code`), with marimo's result shapes. */

export const DEFAULT_EXECUTE_TIMEOUT_S = 30;
/**
 * Most characters of the value one execute_code result carries (its start and end): a tool
 * result is held whole in memory, and read whole by a model. Printed output is capped as over HTTP.
 */
export const EXECUTE_OUTPUT_CAP = 100_000;

const sessionShape = z.object({ name: z.string(), path: z.string(), session_id: z.string() });
const listSessionsResult = z.object({ sessions: z.array(sessionShape) });

const executeCodeResult = z.object({
  success: z.boolean(),
  output: z.string().nullable(),
  stdout: z.array(z.string()),
  stderr: z.array(z.string()),
  errors: z.array(z.string()),
  error: z.string().nullable(),
  // What the risk scan found (riskScan.ts RiskReport; the skill's reference/runs.md): kept out of tools/list's size.
  risk: (z.looseObject({}) as unknown as z.ZodType<RiskReport>).optional(),
  dryRun: z.boolean().optional(),
});
export type CodeExecutionResult = z.infer<typeof executeCodeResult>;

const executeCodeArgs = z.object({
  session_id: z.string().min(1),
  code: z.string(),
  timeout_seconds: z.number().positive().max(3600).optional().describe(`Default ${DEFAULT_EXECUTE_TIMEOUT_S}.`),
  dry_run: z.boolean().optional(),
});

/** Untitled notebooks have no path: their uri names them (cell tools accept it as `notebook`). */
export function sessionEntry(s: SessionInfo): z.infer<typeof sessionShape> {
  const where = s.path ?? s.uri;
  return { name: where.split(/[\\/:]/).pop() || where, path: where, session_id: s.id };
}

export function codeTools(ctx: BridgeServices): ToolRow[] {
  return [
    tool({
      name: 'list_sessions',
      access: 'read',
      description: 'Open notebooks with a kernel: name, path, session_id (for execute_code, or as "notebook").',
      outputSchema: listSessionsResult,
      annotations: { readOnlyHint: true },
      handle: async () => found({ sessions: (await ctx.host.sessions()).map(sessionEntry) }),
    }),
    tool({
      name: 'execute_code',
      access: 'execute',
      description:
        "Run Python in a notebook's kernel as a scratchpad: variables readable, in-place mutations persist, new names " +
        'are discarded; a trailing expression is "output". Interrupted on timeout or cancel: put long work in a cell.' +
        ' What the risk scan found comes back as "risk".',
      inputSchema: executeCodeArgs,
      outputSchema: executeCodeResult,
      handle: async (args, extra) => {
        const { outcome, result } = await executeCode(ctx, args, extra);
        return { outcome, body: result };
      },
    }),
  ];
}

const NOTHING_RAN = { success: false, output: null, stdout: [], stderr: [], errors: [], error: null };

/** A run that did not happen or did not end by itself: marimo's result shape, with the outcome it stands for. */
const failed = (kind: OutcomeKind, error: string, stdout: string[] = [], stderr: string[] = []): CodeExecution => ({
  outcome: { kind, detail: error },
  result: { ...NOTHING_RAN, stdout, stderr, error },
});

/** An execute_code answer: marimo's result, and how the request ended (the tool result and the activity follow from it). */
export interface CodeExecution {
  readonly outcome: Outcome;
  readonly result: CodeExecutionResult;
}

/**
 * Runs through the same path as `POST /api/kernel/execute` (the session's kernel, in the
 * session's turn, its printed output capped and kept whole at a url the same way), collecting
 * what the event stream would have carried.
 */
export async function executeCode(
  ctx: Pick<BridgeServices, 'host' | 'runs' | 'outputs' | 'risk'>,
  args: z.infer<typeof executeCodeArgs>,
  { signal: cancelled, host }: ToolExtra,
): Promise<CodeExecution> {
  let kernel;
  let risk;
  try {
    if (args.dry_run) {
      if (!(await ctx.host.sessions()).some((s) => s.id === args.session_id)) throw new BridgeError('not_found', '');
      const report = await ctx.risk.scan(args.session_id, [{ code: args.code }]);
      return { outcome: { kind: 'ok', detail: '' }, result: { ...NOTHING_RAN, success: true, dryRun: true, risk: report } };
    }
    kernel = await ctx.host.kernelFor(args.session_id);
    risk = await ctx.risk.vet(args.session_id, [{ code: args.code }]);
  } catch (error) {
    if (!(error instanceof BridgeError)) throw error;
    if (error.kind === 'not_found')
      return failed(error.kind, `Session '${args.session_id}' not found. Use list_sessions to find valid session IDs.`);
    return failed(error.kind, error.detail);
  }

  const printed = new CappedOutput(ctx.outputs, SCRATCHPAD_OUTPUT_CAP);
  const streams: Record<StreamName, string[]> = { stdout: [], stderr: [] };
  const seconds = args.timeout_seconds ?? DEFAULT_EXECUTE_TIMEOUT_S;
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), seconds * 1000);
  let result: ExecResult | null;
  try {
    result = await runScratchpad(
      ctx.runs,
      args.session_id,
      kernel,
      args.code,
      (e) => {
        const head = printed.push(e);
        if (head) streams[head.name].push(head.text);
      },
      AbortSignal.any([timeout.signal, cancelled]),
    );
  } finally {
    clearTimeout(timer);
  }
  for (const e of printed.finish((path) => (host ? `http://${host}${path}` : path))) streams[e.name].push(e.text);
  const { stdout, stderr } = streams;
  if (timeout.signal.aborted) {
    const why = result === null ? 'before it started: earlier runs of this session were still going' : 'and was interrupted';
    return failed('timed_out', `Execution timed out after ${seconds}s ${why}`, stdout, stderr);
  }
  if (result === null || cancelled.aborted) return failed('interrupted', 'Execution was cancelled by the client', stdout, stderr);
  const errors = result.success ? [] : [errorLine(stderr)];
  return {
    // The kernel's own end: a run the person's limit or "Stop Agents" stopped says so in its status.
    outcome: { kind: runKind(result.status, result.restarted), detail: errors[0] ?? '' },
    result: {
      success: result.success,
      output: result.output.data === '' ? null : capped(result.output.data),
      stdout,
      stderr,
      errors,
      error: null,
      ...riskField(risk),
    },
  };
}

function capped(text: string): string {
  const kept = new HeadTail(EXECUTE_OUTPUT_CAP);
  kept.push(text);
  return kept.pieces().join('');
}

/** The line of a traceback that names the exception: its last non-empty line. */
function errorLine(stderr: readonly string[]): string {
  const lines = stderr
    .join('')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  return lines[lines.length - 1] ?? 'The code failed without reporting an error';
}
