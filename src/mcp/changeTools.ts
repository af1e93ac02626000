import { notebookQuery, undoBody } from '../core/cellSchemas';
import type { BridgeServices } from '../core/services';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** The MCP twins of GET /notebooks/changes and POST /notebooks/undo, over the same checkpoints. */
export const changeTools = (ctx: Pick<BridgeServices, 'checkpoints'>) => [
  tool({
    name: 'list_changes',
    access: 'read',
    description:
      'Your own changes to notebooks (made from this session), newest first: id, summary, the cells each touched, ' +
      'and whether undo_last_change would take it back now (else why not). "notebook" (optional) limits it to one notebook.',
    inputSchema: notebookQuery,
    annotations: { readOnlyHint: true },
    handle: ({ notebook }) => answer(() => ctx.checkpoints.mine(notebook)),
  }),
  tool({
    name: 'undo_last_change',
    access: 'edit',
    description:
      'Undo one of your own changes to a notebook (an edit, a batch or a code-mode flush) as one undo step: your newest, ' +
      'or the one "checkpoint" names (an id from list_changes). Created cells go, edited cells get their old code, ' +
      'deleted cells come back, moved cells go back. Refused whole, naming the cells and who changed them, when ' +
      'someone changed those cells since. "notebook" (optional) limits it to your changes there.',
    inputSchema: undoBody,
    annotations: { destructiveHint: true },
    describe: ({ checkpoint }, author) => ctx.checkpoints.describeUndo(author, checkpoint),
    handle: ({ notebook, checkpoint }) => answer(() => ctx.checkpoints.undoOwn(notebook, checkpoint)),
  }),
];
