import { notebookQuery, undoBody } from '../core/cells/cellSchemas';
import type { BridgeServices } from '../core/services';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** The MCP twins of GET /notebooks/changes and POST /notebooks/undo, over the same checkpoints. */
export const changeTools = (ctx: Pick<BridgeServices, 'checkpoints'>) => [
  tool({
    name: 'list_changes',
    access: 'read',
    description: 'Your own changes (from this session), newest first, and whether undo_last_change would take each back.',
    inputSchema: notebookQuery,
    annotations: { readOnlyHint: true },
    handle: ({ notebook }) => answer(() => ctx.checkpoints.mine(notebook)),
  }),
  tool({
    name: 'undo_last_change',
    access: 'edit',
    description:
      'Undo your newest change (or "checkpoint", an id from list_changes; in "notebook" when given); refused, naming who, when someone changed its cells since.',
    inputSchema: undoBody,
    annotations: { destructiveHint: true },
    describe: ({ checkpoint }, author) => ctx.checkpoints.describeUndo(author, checkpoint),
    handle: ({ notebook, checkpoint }) => answer(() => ctx.checkpoints.undoOwn(notebook, checkpoint)),
  }),
];
