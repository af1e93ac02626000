import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { actionCode, alsoRuns, type AccessKind, type Gate } from '../core/accessPolicy';
import type { Caller } from '../core/clients';
import { RUN_LIMIT_DETAIL } from '../core/agentRuns';
import { asAuthor } from '../core/checkpoints';
import { BridgeError } from '../core/bridgeError';
import { errorMessage } from '../core/errorMessage';

type Fields = Record<string, unknown>;

/** What a tool handler is given besides its arguments: the call's abort signal (cancel or "Stop Agents"). */
export type ToolExtra = { signal: AbortSignal };

/**
 * One MCP tool, declared as a row the way routes are rows of the route table: its name, what kind
 * of action it is for the access policy, the label its activity carries, and its handler.
 */
export interface ToolRow {
  readonly name: string;
  readonly access: Exclude<AccessKind, 'open' | 'gateway'>;
  /** The activity's label (default `mcp <name>`). */
  readonly label?: string;
  readonly description: string;
  readonly inputSchema?: z.ZodType;
  readonly outputSchema?: z.ZodType;
  readonly annotations?: ToolAnnotations;
  handle(args: Fields, extra: ToolExtra): Promise<CallToolResult>;
}

/** A typed row: the handler sees its arguments as its input schema parses them. */
export function tool<I extends z.ZodType = z.ZodObject<Record<string, never>>>(
  row: Omit<ToolRow, 'inputSchema' | 'handle'> & {
    inputSchema?: I;
    handle(args: z.output<I>, extra: ToolExtra): Promise<CallToolResult>;
  },
): ToolRow {
  return row as ToolRow;
}

/**
 * Registers the rows on `server`, each behind the access policy and the activity record. A
 * refusal is a tool error carrying the policy's sentence; "Stop Agents" aborts the call as the
 * client's cancel would.
 */
export function registerTools(server: McpServer, gate: Gate, caller: Caller, rows: readonly ToolRow[]): void {
  for (const row of rows) {
    const { name, access: kind, description, inputSchema, outputSchema, annotations } = row;
    const guarded = async (...params: unknown[]): Promise<CallToolResult> => {
      // The SDK passes (args, extra), or (extra) alone to a tool without an input schema.
      const extra = params[params.length - 1] as ToolExtra;
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
            ? { also: ['run'] as const, label: `${row.label ?? `mcp ${name}`} (edit and run)` }
            : { label: row.label ?? `mcp ${name}` }),
          notebook: typeof notebook === 'string' ? notebook : typeof session === 'string' ? session : undefined,
          code: actionCode(code, rest),
        });
      } catch (error) {
        if (!(error instanceof BridgeError)) throw error;
        return { isError: true, content: [{ type: 'text', text: error.detail }] };
      }
      if (!activity) return row.handle(args, extra);
      const stop = new AbortController();
      const unlisten = activity.onStop(() => stop.abort());
      try {
        const author = { client: activity.action.client, action: activity.action.id };
        const own = { signal: AbortSignal.any([extra.signal, stop.signal]) };
        const result = await asAuthor(author, () => row.handle(args, own));
        const body = resultBody(result);
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
        activity.end('failed', errorMessage(error));
        throw error;
      } finally {
        unlisten();
      }
    };
    const config = { description, inputSchema, outputSchema, annotations };
    (server.registerTool as (name: string, config: object, cb: typeof guarded) => unknown).call(server, name, config, guarded);
  }
}

/** A result's JSON: its structured content, else its first text part when that is JSON. */
function resultBody(result: CallToolResult): Fields {
  if (result.structuredContent) return result.structuredContent;
  const text = result.content.find((c) => c.type === 'text')?.text;
  if (!text?.startsWith('{')) return {};
  try {
    return JSON.parse(text) as Fields;
  } catch {
    return {};
  }
}
