import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BridgeServices } from '../core/services';

/**
 * The MCP transport, loaded on its first request: the SDK is most of the bundle's code, and
 * activation needs none of it.
 */
export async function lazyMcp(ctx: BridgeServices, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  return (await import('./server')).serveMcp(ctx, req, res, body);
}
