/** What every kernel behind a notebook offers the bridge, whoever implements it. */
import type { RunOutcome } from '../outcome';

export type InspectQuery =
  | { readonly kind: 'variables' }
  | { readonly kind: 'variable'; readonly name: string }
  | { readonly kind: 'analyze'; readonly cells: readonly { id: string; code: string }[]; readonly ipython: boolean };

/** A rich value as mime type → string (binary mimes base64-encoded, as in Jupyter). */
export type MimeBundle = Record<string, string>;

export type StreamName = 'stdout' | 'stderr';

/** Console output of a scratchpad run, in the order it happened. */
export interface StreamEvent {
  readonly name: StreamName;
  readonly text: string;
}

/**
 * Where a notebook's kernel is. `not_started`: it starts with the first run; `dead`: it exited
 * (its state is gone; the builtin kernel starts again with the next run); `unknown`: the kernel's
 * API does not tell (`KernelStatus.note` says why).
 */
export type KernelState = 'not_started' | 'starting' | 'idle' | 'busy' | 'restarting' | 'dead' | 'unknown';

export interface KernelStatus {
  readonly state: KernelState;
  /**
   * When the kernel now serving the notebook started (ms since the epoch), where the bridge knows:
   * cell runs that started before it are not runs of this kernel.
   */
  readonly startedAt?: number | undefined;
  /** Why the state is `unknown`. */
  readonly note?: string;
}

/** What stopping a run took: SIGINT was enough, or the kernel was restarted (its state lost). */
export type InterruptHow = 'sigint' | 'restart';

/** The body of marimo's `done` event. */
export interface ExecResult {
  readonly success: boolean;
  /** success === (status === 'succeeded'). */
  readonly status: RunOutcome;
  /** Stopping the run needed a kernel restart: the kernel's state is lost. */
  readonly restarted?: true;
  readonly output: { readonly mimetype: string; readonly data: string };
}

export const NO_OUTPUT: ExecResult['output'] = Object.freeze({ mimetype: 'text/plain', data: '' });

/**
 * A live kernel that can run scratchpad code: a shallow copy of the kernel's globals, new
 * bindings discarded, the trailing expression returned. Errors are reported as a traceback on
 * the stderr stream and `success: false`, never thrown. Aborting `signal` interrupts the run
 * (or drops it while it is still queued) and the promise still resolves.
 */
export interface Kernel {
  /** Short name shown in listings ("builtin", "marimo", "jupyter"). */
  readonly kind: string;
  executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult>;
  /** Where the kernel is now (read when asked, never cached). */
  status(): KernelStatus;
  /**
   * Answers a kernel_inspect.py query over the kernel's own protocol, beside its runs (no run,
   * no execution count, no history); absent where the kernel has no such channel (variables.ts).
   */
  inspect?(query: InspectQuery): Promise<unknown>;
}

/** Picks the value of a mimebundle that `done.output` carries: text/plain, else text/html. */
export function reduceMimeBundle(bundle: MimeBundle | null | undefined): ExecResult['output'] {
  if (!bundle) return NO_OUTPUT;
  if (typeof bundle['text/plain'] === 'string') return { mimetype: 'text/plain', data: bundle['text/plain'] };
  if (typeof bundle['text/html'] === 'string') return { mimetype: 'text/html', data: bundle['text/html'] };
  return NO_OUTPUT;
}
