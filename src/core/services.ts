import type { Gate } from './access';
import type { CellService } from './cells';
import type { Checkpoints } from './checkpoints';
import type { KeyedQueue } from './keyedQueue';
import type { NotebookHost } from './sessions';

/** What every transport (HTTP routes, MCP tools) works with; built once per server by the composition root. */
export interface BridgeServices {
  host: NotebookHost;
  /** One run at a time per session, whichever transport sent it. */
  runs: KeyedQueue;
  version: string;
  /** Reading, editing and running the cells of open notebooks. */
  cells: CellService;
  /** The person's access policy and the activity record every agent action passes. */
  access: Gate;
  /** Every agent change to a notebook, to keep, revert or undo. */
  checkpoints: Checkpoints;
}
