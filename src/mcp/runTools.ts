import { z } from 'zod';
import { Activity } from '../core/agents/accessPolicy';
import { BridgeError } from '../core/bridgeError';
import type { Caller } from '../core/agents/clients';
import type { SessionInfo } from '../core/model/notebookHost';
import { runIdOf, type AgentRun } from '../core/runs/runHistory';
import type { BridgeServices } from '../core/services';
import { executeCode, type CodeExecution } from './tools';
import { found, tool, type ToolExtra, type ToolRow } from './toolRows';

export const listRunsArgs = z.strictObject({
  notebook: z.string().optional(),
  limit: z.number().int().min(1).max(500).optional(),
});
export const rerunArgs = z.strictObject({
  code: z.string().optional(),
  timeout_seconds: z.number().int().min(1).max(3600).optional(),
});

/** The open notebook a past run ran in: the session it named, its path or uri, or the only one open. */
async function sessionOf(ctx: Pick<BridgeServices, 'host'>, run: AgentRun): Promise<SessionInfo> {
  const sessions = await ctx.host.sessions();
  const named = run.notebook;
  const session =
    named === null
      ? sessions.length === 1
        ? sessions[0]
        : undefined
      : sessions.find((s) => [s.id, s.path, s.uri].includes(named));
  if (!session)
    throw new BridgeError(
      'not_found',
      `The notebook of ${run.id} (${named ?? 'unnamed'}) is not open with a kernel; open it, or run the code with execute_code`,
    );
  return session;
}

/**
 * Runs a past run's code again (or `code` instead) as a scratchpad in its notebook: the same path,
 * risk scan and ruling as any execute; it is a new run of its own in the history.
 */
export async function rerun(
  ctx: Pick<BridgeServices, 'host' | 'runs' | 'outputs' | 'risk' | 'history'>,
  caller: Pick<Caller, 'owner'>,
  id: string,
  args: z.infer<typeof rerunArgs>,
  /** The call's abort signal, and the Host the client reached the bridge at (for output urls). */
  extra: ToolExtra,
): Promise<CodeExecution & { run: string | undefined; rerunOf: string }> {
  const past = ctx.history.get(caller, id);
  const session = await sessionOf(ctx, past);
  const code = args.code ?? past.code;
  const action = Activity.current()?.action;
  const execution = await executeCode(ctx, { session_id: session.id, code, timeout_seconds: args.timeout_seconds }, extra);
  return { ...execution, run: action && runIdOf(action), rerunOf: id };
}

/** The run history over MCP: an agent's own runs, one of them whole, and running one again. */
export function runTools(ctx: BridgeServices, caller: Caller): ToolRow[] {
  return [
    tool({
      name: 'list_runs',
      access: 'read',
      description: 'Your recent runs, newest first, with status and "risk".',
      inputSchema: listRunsArgs,
      annotations: { readOnlyHint: true },
      handle: async (args) => found({ runs: ctx.history.list(caller, args) }),
    }),
    tool({
      name: 'get_run',
      access: 'read',
      description: 'One of your runs with its code and output.',
      inputSchema: z.strictObject({ run_id: z.string() }),
      annotations: { readOnlyHint: true },
      handle: async (args) => {
        const { owner: _o, ...run } = ctx.history.get(caller, args.run_id);
        return found(run);
      },
    }),
    tool({
      name: 'rerun',
      access: 'execute',
      description: 'Run one of your runs again (or `code` in its place), as execute_code.',
      inputSchema: rerunArgs.extend({ run_id: z.string() }),
      handle: async ({ run_id, ...args }, extra) => {
        const { outcome, result, run, rerunOf } = await rerun(ctx, caller, run_id, args, extra);
        return { outcome, body: { ...result, run, rerunOf } };
      },
    }),
  ];
}
