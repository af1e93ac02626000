import { notebookBody } from '../core/cells/cellSchemas';
import type { BridgeServices } from '../core/services';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** `get_presence`: the MCP twin of GET /notebooks/presence, over the same cell service. */
export const presenceTool = (ctx: Pick<BridgeServices, 'cells'>) =>
  tool({
    name: 'get_presence',
    access: 'read',
    description: "Who is where: cells the person types in (writes refused), agents' cells, runs.",
    inputSchema: notebookBody,
    annotations: { readOnlyHint: true },
    handle: ({ notebook }) => answer(() => ctx.cells.presence(notebook)),
  });
