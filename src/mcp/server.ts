import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BridgeServices } from '../core/services';
import { mcpClient, registerTools } from './access';
import { cellTools } from './cellTools';
import { codeTools } from './tools';

const INSTRUCTIONS = [
  'Agent Bridge: the notebooks a person has open in VS Code, live.',
  'list_sessions, then execute_code(session_id, code) to run Python in a notebook kernel as a scratchpad',
  '(notebook variables readable, new names discarded). For durable changes use the cell tools:',
  'list_cells/get_cell before edit_cell/delete_cell (read-before-write: an unread or changed cell is refused',
  'with its current state; re-read and retry), edit_cells for several changes as one undo step, run_cell to run and wait.',
].join(' ');

/** One server per request, as the bridge is stateless over MCP: every request carries all it needs. */
export function createMcpServer(ctx: BridgeServices, client: string): McpServer {
  const server = new McpServer({ name: 'agent-bridge', version: ctx.version }, { instructions: INSTRUCTIONS });
  registerTools(server, ctx.access, client, [...codeTools(ctx), ...cellTools(ctx)]);
  return server;
}

/**
 * `POST /mcp/server`: Streamable HTTP, stateless (no session id), replies as SSE. The request has
 * already passed the bridge's Host, Origin, token and content-type checks and its body is parsed.
 * Closing the connection aborts the tool calls in flight, which interrupts their runs.
 */
export async function serveMcp(ctx: BridgeServices, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const server = createMcpServer(ctx, mcpClient(req, body));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: false });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}
