import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  claimOf,
  cleanName,
  ClientRegistry,
  MCP_SESSION_HEADER,
  readerOf,
  SESSIONS_PER_MINUTE,
  type Caller,
} from '../core/agents/clients';
import { BridgeError } from '../core/bridgeError';
import type { BridgeServices } from '../core/services';
import { registerTools, serveCompactToolList } from './toolRows';
import { cellTools } from './cellTools';
import { codeTools } from './tools';
import { changeTools } from './changeTools';
import { presenceTool } from './presenceTool';
import { runTools } from './runTools';

const INSTRUCTIONS = [
  'Agent Bridge: the notebooks a person has open in VS Code, live.',
  'list_sessions, then execute_code(session_id, code) to run Python in a notebook kernel as a scratchpad',
  '(notebook variables readable, new names discarded). For durable changes use the cell tools:',
  'list_cells (view "brief" to find cells) and get_cell before edit_cell/delete_cell/edit_cells (read-before-write: a',
  'cell you did not read at its current version is refused with its current state; re-read and retry, or pass its',
  '"version", or "force": true), edit_cells for several changes as one undo step, run_cell to run and wait;',
  'list_changes lists your own changes; undo_last_change takes back your newest (or the one you name) when nobody',
  'changed its cells since: keep calling from this session, which is what makes them yours.',
  '"notebook" is a session id, path or uri (omit it when one notebook is open); a cell "ref" is its id or index',
  '(negative counts from the end); "outputs" is "none", "summary" or "full". The skill\'s reference/mcp.md says more.',
  'list_runs, get_run and rerun: your past runs, with what the risk scan found in each.',
  'get_presence says where the person and other agents are working (cells the person is typing in refuse writes).',
].join(' ');

/** One server per request, as the bridge is stateless over MCP: every request carries all it needs. */
export function createMcpServer(ctx: BridgeServices, caller: Caller): McpServer {
  const server = new McpServer({ name: 'agent-bridge', version: ctx.version }, { instructions: INSTRUCTIONS });
  const own = { ...ctx, cells: ctx.cells.as(readerOf(caller)) }; // read-before-write is kept per client
  const rows = [...codeTools(own), ...cellTools(own), ...changeTools(own), ...runTools(own, caller), presenceTool(own)];
  registerTools(server, ctx.access, caller, rows);
  serveCompactToolList(server, rows);
  return server;
}

/**
 * `POST /mcp/server`: Streamable HTTP, replies as SSE, one server per request. The request has
 * already passed the bridge's Host, Origin, token and content-type checks and its body is parsed.
 * Closing the connection aborts the tool calls in flight, which interrupts their runs.
 *
 * Who is calling: an `initialize` gets a fresh `Mcp-Session-Id` (clients send it back on every
 * later request), and the bridge learns that id, with the `clientInfo` as the client's claim,
 * only once the SDK has accepted the `initialize`. Later calls are attributed through it. A
 * client may start `SESSIONS_PER_MINUTE` sessions a minute; past that, 429.
 */
export async function serveMcp(ctx: BridgeServices, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const identities = ctx.access.identities;
  const sent = req.headers[MCP_SESSION_HEADER];
  const caller = identities.identify(Array.isArray(sent) ? sent[0] : sent, claimOf(req.headers));
  const init = initialize(body);
  if (init) {
    const waitMs = identities.admitSession(init.name ?? caller.claim);
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000);
      res.setHeader('Retry-After', String(seconds));
      throw new BridgeError(
        'too_many_requests',
        `${init.name ?? caller.claim ?? 'This client'} started ${SESSIONS_PER_MINUTE} MCP sessions in the last minute: keep using the Mcp-Session-Id you were given (it is what makes your changes yours), or retry in ${seconds} s.`,
      );
    }
  }
  const minted = init ? ClientRegistry.newCredential() : undefined;
  if (minted) res.setHeader(MCP_SESSION_HEADER, minted);
  const server = createMcpServer(ctx, caller);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: false });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
  const info = minted && server.server.getClientVersion();
  if (minted && info) identities.register(minted, nameOf(info) ?? caller.claim, 'mcp');
}

/** The name a client gives in `clientInfo`: "claude-code/1.0.3". */
const nameOf = (info: { name?: unknown; version?: unknown }) =>
  typeof info.name === 'string'
    ? cleanName(`${info.name}${typeof info.version === 'string' && info.version ? `/${info.version}` : ''}`)
    : undefined;

/** The `initialize` a request carries (with the name its `clientInfo` gives), if any. */
function initialize(body: unknown): { name: string | undefined } | undefined {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  const init = messages.find((m) => !!m && typeof m === 'object' && (m as Record<string, unknown>)['method'] === 'initialize');
  if (!init) return undefined;
  const params = (init as { params?: { clientInfo?: unknown } }).params;
  const info = params?.clientInfo;
  return { name: info && typeof info === 'object' ? nameOf(info) : undefined };
}
