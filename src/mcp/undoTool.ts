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
      'Undo your own newest change (in "notebook" when given); refused, naming who, when someone changed those cells since.',
    inputSchema: notebookBody,
    annotations: { destructiveHint: true },
    handle: ({ notebook }) => answer(() => ctx.checkpoints.undoOwn(notebook)),
  });
