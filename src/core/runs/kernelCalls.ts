/**
 * Calls into the bridge from code running in a kernel (code mode: `agent_bridge`), under the
 * person's say. A call is answered only inside the run that made it, while that run is in flight,
 * and as that run: the agent action that started it (re-checked against the access mode at each
 * call, stopped by "Stop Agents", the author of what the call changes), or the person's own cell
 * run where they let cells use code mode. Every refusal lands in the activity record. The kernel
 * driver says which run called (kernelProcess.ts); this rules on it. No vscode here.
 */
import { Activity, ruleOn, type AccessKind, type Gate } from '../agents/accessPolicy';
import { asAuthor, authorOf } from '../cells/checkpoints';
import { BridgeError } from '../bridgeError';

/** Who a call from the person's own cell run acts as. */
const CELL_RUN_AUTHOR = 'code mode in a cell you ran';

/** A call into the bridge, as the kernel driver and the call's method describe it. */
export interface KernelCall {
  readonly method: string;
  /** What it does, as the access policy sees it (a change is an edit; also a run when it runs cells). */
  readonly kind: AccessKind;
  readonly also: readonly AccessKind[];
  /** The notebook whose kernel called (its uri). */
  readonly notebook: string;
  /** Its parameters, for the record of a refusal. */
  readonly code: string;
  /**
   * The run that made it, while in flight: a cell run or a scratchpad run, and the agent action
   * it was queued for (`Activity.current()` when it was; undefined for the person's own runs).
   */
  readonly run: { readonly mode: 'cell' | 'scratchpad'; readonly owner: unknown } | undefined;
}

const NO_RUN =
  'Agent Bridge refused this call: it came from no run in flight (a thread or subprocess that an earlier run left running, ' +
  'or code running between runs). The bridge answers code mode only while the run that calls it is running: ' +
  'make the change from a new scratchpad run.';
const IN_CELLS =
  'Agent Bridge refused this call: a notebook cell called the bridge, and code mode is for scratchpad runs ' +
  '(the person can allow cells with the VS Code setting agentBridge.codeMode.inCells).';
const NO_ACTION =
  'Agent Bridge refused this call: the scratchpad run that made it belongs to no agent action the bridge is recording.';
const STOPPED = 'Agent Bridge refused this call: the person stopped every agent run (Agent Bridge: Stop Agents).';
const ENDED =
  'Agent Bridge refused this call: the request that started this run has already been answered (it did not wait for the run), ' +
  'so the run acts for no agent action any more.';

/** A refusal of the same kind from the same notebook is recorded at most this often (a looping thread would flood the record). */
const RECORD_EVERY_MS = 1000;

/** The rules over every kernel's calls in this window. */
export class KernelCalls {
  private readonly recorded = new Map<string, number>();

  constructor(
    private readonly gate: Gate,
    /** agentBridge.codeMode.inCells: cells may call too. */
    private readonly inCells: () => boolean,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Runs `answer` for `call` when the rules let it through: inside the calling run's action, its
   * changes by that action's agent, aborted (through `signal`) when the person stops it.
   * Otherwise records the refusal and throws it (a BridgeError of kind `refused`: CallRefused in
   * Python).
   */
  async answer<T>(call: KernelCall, signal: AbortSignal, answer: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const activity = call.run?.owner instanceof Activity ? call.run.owner : undefined;
    const refuse = (detail: string) => this.refuse(call, activity, detail);
    if (!call.run) return refuse(NO_RUN);
    if (call.run.mode === 'cell' && !this.inCells()) return refuse(IN_CELLS);
    const ruling = ruleOn(this.gate.mode, call.kind, call.also);
    // `ask` was answered when the run was allowed (or the person ran the cell themselves).
    if (typeof ruling === 'object') return refuse(ruling.refuse);
    if (!activity) {
      if (call.run.mode === 'scratchpad') return refuse(NO_ACTION);
      return asAuthor({ client: CELL_RUN_AUTHOR }, () => answer(signal));
    }
    if (activity.state === 'stopped') return refuse(STOPPED);
    if (activity.state === 'ended') return refuse(ENDED);
    const stop = new AbortController();
    const abort = () => stop.abort();
    signal.addEventListener('abort', abort, { once: true });
    const unlisten = activity.onStop(abort);
    try {
      return await activity.within(() => asAuthor(authorOf(activity.action), () => answer(stop.signal)));
    } finally {
      unlisten();
      signal.removeEventListener('abort', abort);
    }
  }

  private refuse(call: KernelCall, activity: Activity | undefined, detail: string): never {
    const key = `${call.notebook}\n${detail}`;
    const at = this.now();
    if (at - (this.recorded.get(key) ?? -Infinity) < RECORD_EVERY_MS) throw new BridgeError('refused', detail);
    this.recorded.set(key, at);
    const { client, about, claim, credential, owner } = activity?.action ?? {
      client: `code in the kernel of ${call.notebook}`,
      about: `code running in the kernel of ${call.notebook} outside any run`,
      claim: undefined,
      credential: undefined,
      owner: undefined,
    };
    return this.gate.refuse(
      {
        transport: 'kernel',
        client,
        about,
        claim,
        credential,
        owner,
        kind: call.kind,
        also: call.also,
        label: `code mode ${call.method}`,
        notebook: call.notebook,
        code: call.code,
      },
      detail,
    );
  }
}
