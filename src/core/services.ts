import type { Gate } from './agents/accessPolicy';
import type { CellService } from './model/cellService';
import type { Checkpoints } from './cells/checkpoints';
import type { KeyedQueue } from './flow/keyedQueue';
import type { ScratchpadOutputs } from './outputs/scratchpadOutputs';
import type { NotebookHost } from './model/notebookHost';
import type { RiskChecks } from './cells/riskChecks';
import type { RunHistory } from './runs/runHistory';

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
