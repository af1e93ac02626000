import { notebookBody } from '../core/cells/cellSchemas';
import type { BridgeServices } from '../core/services';
import { PERSON_EDITING_MS } from '../core/agents/presence';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** `get_presence`: the MCP twin of GET /notebooks/presence, over the same cell service. */
export const presenceTool = (ctx: Pick<BridgeServices, 'cells'>) =>
  tool({
    name: 'get_presence',
    access: 'read',
    description: `Who is where now: cells the person is typing in (writes to them refused for ${PERSON_EDITING_MS / 1000} s unless forced), other agents' cells and verbs, what runs for whom.`,
    inputSchema: notebookBody,
    annotations: { readOnlyHint: true },
    handle: ({ notebook }) => answer(() => ctx.cells.presence(notebook)),
  });
