import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { actionCode, alsoRuns, type AccessKind, type Gate } from '../core/access';
import type { Caller } from '../core/clients';
import { RUN_LIMIT_DETAIL } from '../core/agentRuns';
import { asAuthor } from '../core/checkpoints';
import { BridgeError } from '../core/errors';

/** Tools that run code; others are reads when annotated read-only, else edits. */
const RUNS: Readonly<Record<string, AccessKind>> = {
  execute_code: 'execute',
  run_cell: 'run',
  run_cells: 'run',
  interrupt: 'run',
  restart_kernel: 'run',
  start_kernel: 'run',
};

type Fields = Record<string, unknown>;

type AnyCallback = (...params: unknown[]) => CallToolResult | Promise<CallToolResult>;
type Extra = { signal: AbortSignal } & Fields;

/**
 * Puts every tool registered on `server` from here on behind the access policy and the activity
 * record: one wrapper, applied before the tools are registered. A refusal is a tool error carrying
 * the policy's sentence; "Stop Agents" aborts the call as the client's cancel would.
 */
export function guardTools(server: McpServer, gate: Gate, caller: Caller): void {
  const register = server.registerTool.bind(server) as (name: string, config: Fields, cb: AnyCallback) => unknown;
  const guarded = (name: string, config: Fields, cb: AnyCallback) => {
    const readOnly = (config['annotations'] as { readOnlyHint?: boolean } | undefined)?.readOnlyHint === true;
    const kind = RUNS[name] ?? (readOnly ? 'read' : 'edit');
    return register(name, config, async (...params: unknown[]) => {
      const extra = params[params.length - 1] as Extra;
      const args = params.length > 1 ? (params[0] as Fields) : {};
      const { notebook, session_id: session, code, ...rest } = args;
      let activity;
      try {
        activity = await gate.enter({
          transport: 'mcp',
          ...caller,
          left: extra.signal,
          kind,
          ...(kind === 'edit' && alsoRuns(rest['run'])
            ? { also: ['run'] as const, label: `mcp ${name} (edit and run)` }
            : { label: `mcp ${name}` }),
          notebook: typeof notebook === 'string' ? notebook : typeof session === 'string' ? session : undefined,
          code: actionCode(code, rest),
        });
      } catch (error) {
        if (!(error instanceof BridgeError)) throw error;
        return { isError: true, content: [{ type: 'text', text: error.detail }] };
      }
      if (!activity) return cb(...params);
      const stop = new AbortController();
      const unlisten = activity.onStop(() => stop.abort());
      const own = { ...extra, signal: AbortSignal.any([extra.signal, stop.signal]) };
      try {
        const author = { client: activity.action.client, action: activity.action.id };
        const result = await asAuthor(author, () => cb(...params.slice(0, -1), own));
        const body = (result.structuredContent ?? {}) as Fields;
        const error = [body['error'], ...(Array.isArray(body['errors']) ? body['errors'] : [])].find(
          (e) => typeof e === 'string',
        );
        activity.note(JSON.stringify(body));
        const timedOut =
          typeof error === 'string' && (error.startsWith('Execution timed out') || error.includes(RUN_LIMIT_DETAIL));
        const failed = result.isError === true || body['success'] === false;
        activity.end(timedOut ? 'timed_out' : failed ? 'failed' : 'succeeded', typeof error === 'string' ? error : '');
        return result;
      } catch (error) {
        activity.end('failed', error instanceof Error ? error.message : String(error));
        throw error;
      } finally {
        unlisten();
      }
    });
  };
  server.registerTool = guarded as unknown as McpServer['registerTool'];
}
