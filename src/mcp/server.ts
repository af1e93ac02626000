import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { claimOf, cleanName, ClientRegistry, MCP_SESSION_HEADER, readerOf, type Caller } from '../core/clients';
import type { BridgeServices } from '../core/services';
import { registerTools } from './toolRows';
import { cellTools } from './cellTools';
import { codeTools } from './tools';
import { undoTool } from './undoTool';
import { runTools } from './runTools';

const INSTRUCTIONS = [
  'Agent Bridge: the notebooks a person has open in VS Code, live.',
  'list_sessions, then execute_code(session_id, code) to run Python in a notebook kernel as a scratchpad',
  '(notebook variables readable, new names discarded). For durable changes use the cell tools:',
  'list_cells/get_cell before edit_cell/delete_cell (read-before-write: an unread or changed cell is refused',
  'with its current state; re-read and retry), edit_cells for several changes as one undo step, run_cell to run and wait;',
  'undo_last_change takes back your own newest change when nobody changed those cells since.',
  'list_runs, get_run and rerun: your past runs, with what the risk scan found in each.',
].join(' ');

/** One server per request, as the bridge is stateless over MCP: every request carries all it needs. */
export function createMcpServer(ctx: BridgeServices, caller: Caller): McpServer {
  const server = new McpServer({ name: 'agent-bridge', version: ctx.version }, { instructions: INSTRUCTIONS });
  const own = { ...ctx, cells: ctx.cells.as(readerOf(caller)) }; // read-before-write is kept per client
  registerTools(server, ctx.access, caller, [...codeTools(own), ...cellTools(own), undoTool(own), ...runTools(own, caller)]);
  return server;
}

/**
 * `POST /mcp/server`: Streamable HTTP, replies as SSE, one server per request. The request has
 * already passed the bridge's Host, Origin, token and content-type checks and its body is parsed.
 * Closing the connection aborts the tool calls in flight, which interrupts their runs.
 *
 * Who is calling: an `initialize` gets a fresh `Mcp-Session-Id` (clients send it back on every
 * later request), and the bridge learns that id, with the `clientInfo` as the client's claim,
 * only once the SDK has accepted the `initialize`. Later calls are attributed through it.
 */
export async function serveMcp(ctx: BridgeServices, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const identities = ctx.access.identities;
  const sent = req.headers[MCP_SESSION_HEADER];
  const caller = identities.identify(Array.isArray(sent) ? sent[0] : sent, claimOf(req.headers));
  const minted = initializes(body) ? ClientRegistry.newCredential() : undefined;
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
  if (minted && info) {
    const name = cleanName(`${info.name}${info.version ? `/${info.version}` : ''}`);
    identities.register(minted, name ?? caller.claim);
  }
}

function initializes(body: unknown): boolean {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  return messages.some((m) => !!m && typeof m === 'object' && (m as Record<string, unknown>)['method'] === 'initialize');
}
