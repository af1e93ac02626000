import { notebookBody } from '../core/cellSchemas';
import type { BridgeServices } from '../core/services';
import { PERSON_EDITING_MS, PERSON_RECENT_MS } from '../core/presence';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** `get_presence`: the MCP twin of GET /notebooks/presence, over the same cell service. */
export const presenceTool = (ctx: Pick<BridgeServices, 'cells'>) =>
  tool({
    name: 'get_presence',
    access: 'read',
    description:
      `Who is where in a notebook now. "person": the cells the person selected or typed into in the last ${PERSON_RECENT_MS / 1000} s ` +
      `(seconds since their last keystroke; "editing": they typed in the last ${PERSON_EDITING_MS / 1000} s, and a write to that cell ` +
      'is refused unless forced: work elsewhere or wait). "agents": the other agents active in it and the cell each works on ' +
      '("reading", "editing" or "running"; you are marked "you"). "running": what runs, and for whom (null: started in the editor).',
    inputSchema: notebookBody,
    annotations: { readOnlyHint: true },
    handle: ({ notebook }) => answer(() => ctx.cells.presence(notebook)),
  });
