import type { Gate } from './accessPolicy';
import type { CellService } from './cellService';
import type { Checkpoints } from './checkpoints';
import type { KeyedQueue } from './keyedQueue';
import type { ScratchpadOutputs } from './scratchpadOutputs';
import type { NotebookHost } from './notebookHost';
import type { RiskChecks } from './riskChecks';
import type { RunHistory } from './runHistory';

/** What every transport (HTTP routes, MCP tools) works with; built once per server by the composition root. */
export interface BridgeServices {
  host: NotebookHost;
  /** One run at a time per session, whichever transport sent it. */
  runs: KeyedQueue;
  /** The whole output of scratchpad runs whose answer was capped, for a while. */
  outputs: ScratchpadOutputs;
  /** The bridge's own version. */
  version: string;
  /** The marimo version given where marimo gives its own (marimoVersion.ts). */
  marimoVersion: () => string;
  /** Reading, editing and running the cells of open notebooks. */
  cells: CellService;
  /** The person's access policy and the activity record every agent action passes. */
  access: Gate;
  /** kernel_inspect.py's text: how variables are read in kernels that are not ours (variables.ts). */
  inspectProgram: () => string;
  /** Every agent change to a notebook, to keep, revert or undo. */
  checkpoints: Checkpoints;
  /** The risk scan before every agent run, and the person's ruling on it. */
  risk: RiskChecks;
  /** The agents' past runs, to list and run again. */
  history: RunHistory;
}
