import { notebookBody } from '../core/cellSchemas';
import type { BridgeServices } from '../core/services';
import { tool } from './toolRows';
import { answer } from './cellTools';

/** `undo_last_change`: the MCP twin of POST /notebooks/undo, over the same checkpoints. */
export const undoTool = (ctx: Pick<BridgeServices, 'checkpoints'>) =>
  tool({
    name: 'undo_last_change',
    access: 'edit',
    description:
      'Undo your own newest change to a notebook (an edit, a batch or a code-mode flush) as one undo step: ' +
      'created cells go, edited cells get their old code, deleted cells come back, moved cells go back. ' +
      'Refused whole, naming the cells and who changed them, when someone changed those cells since. ' +
      '"notebook" (optional) limits it to your newest change there.',
    inputSchema: notebookBody,
    annotations: { destructiveHint: true },
    handle: ({ notebook }) => answer(() => ctx.checkpoints.undoOwn(notebook)),
  });
