/**
 * How a request ended, as one typed value: every transport derives its answer from the kind (the
 * HTTP status, the MCP tool result, the activity record's outcome), never from the words of a
 * message. A run that ended (ok, failed, interrupted, kernel_restarted, timed_out) is reported in
 * a 200 answer; a wait that ran out (still_running) is a 504 over HTTP but a result to read over
 * MCP; every other kind is the request's own failure.
 */
/** How a run ended. */
export type RunOutcome = 'succeeded' | 'failed' | 'interrupted' | 'timed_out';

export const OUTCOME_KINDS = [
  'ok',
  /** The code ran and raised; the answer reports it. */
  'failed',
  /** Stopped by an interrupt: the agent's, the person's "Stop Agents", or the client leaving. */
  'interrupted',
  /** Stopping the run, or a restart, threw the kernel's state away. */
  'kernel_restarted',
  /** The run reached its time limit (the person's cap, execute_code's timeout) and was stopped. */
  'timed_out',
  /** A wait for runs ran out while they go on: the answer says where they are (wait again, or interrupt). */
  'still_running',
  /** The person's access policy said no (the mode, a denial, no answer). */
  'refused',
  /** Outside what the bridge lets agents reach (a path outside the workspace, a page's Origin, a kernel another extension guards). */
  'forbidden',
  'unauthorized',
  'bad_input',
  'not_found',
  'method_not_allowed',
  /** What the agent read changed since (read-before-write, the notebook changed meanwhile, the file on disk). */
  'stale',
  /** The notebook's state does not allow it now (no kernel, cells busy, untitled). */
  'conflict',
  'too_large',
  /** The client has as many requests waiting or streaming as it may (the answer names the limit): retry once one ends. */
  'busy',
  'unsupported_media',
  /** The Host header names another server (DNS rebinding defence). */
  'misdirected',
  /** The kernel gave no answer, or one the bridge cannot read. */
  'kernel_error',
  /** The kernel did not answer, start or restart in the time the bridge gives it. */
  'kernel_timeout',
  /** What it needs is not ready yet (an extension still activating): retry. */
  'unavailable',
  /** The client asked too often (new MCP sessions): retry later, or reuse what it has. */
  'too_many_requests',
  /** The bridge's own fault. */
  'internal',
] as const;

export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

/** The ways a run ends, which an answer reports rather than fails with. */
export type RunEnd = 'ok' | 'failed' | 'interrupted' | 'kernel_restarted' | 'timed_out';

/** The kinds a request fails with (a BridgeError, an MCP tool error); `still_running` is answered, not thrown. */
export type ErrorKind = Exclude<OutcomeKind, RunEnd | 'still_running'>;

/** What the activity record calls an action's end (the view's icons, the audit log's `outcome`). */
export type ActionOutcome = RunOutcome | 'refused';

export interface Outcome {
  readonly kind: OutcomeKind;
  /** The sentence an agent reads: what happened and what to do. */
  readonly detail: string;
  /** Machine-readable fields the answer carries beside `detail` (e.g. the current cell on a stale write). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

interface Derived {
  readonly http: number;
  readonly record: ActionOutcome;
  /** An MCP tool error, or a result to read (a run that ended, a wait that ran out while the run goes on). */
  readonly mcp: 'result' | 'error';
}

/** The one table every transport reads; typed over every kind, so a new kind cannot go unmapped. */
const DERIVED: { readonly [K in OutcomeKind]: Derived } = {
  ok: { http: 200, record: 'succeeded', mcp: 'result' },
  failed: { http: 200, record: 'failed', mcp: 'result' },
  interrupted: { http: 200, record: 'interrupted', mcp: 'result' },
  kernel_restarted: { http: 200, record: 'interrupted', mcp: 'result' },
  timed_out: { http: 200, record: 'timed_out', mcp: 'result' },
  still_running: { http: 504, record: 'timed_out', mcp: 'result' },
  refused: { http: 403, record: 'refused', mcp: 'error' },
  forbidden: { http: 403, record: 'failed', mcp: 'error' },
  unauthorized: { http: 401, record: 'failed', mcp: 'error' },
  bad_input: { http: 400, record: 'failed', mcp: 'error' },
  not_found: { http: 404, record: 'failed', mcp: 'error' },
  method_not_allowed: { http: 405, record: 'failed', mcp: 'error' },
  stale: { http: 409, record: 'failed', mcp: 'error' },
  conflict: { http: 409, record: 'failed', mcp: 'error' },
  too_large: { http: 413, record: 'failed', mcp: 'error' },
  busy: { http: 429, record: 'refused', mcp: 'error' },
  unsupported_media: { http: 415, record: 'failed', mcp: 'error' },
  misdirected: { http: 421, record: 'failed', mcp: 'error' },
  kernel_error: { http: 502, record: 'failed', mcp: 'error' },
  kernel_timeout: { http: 504, record: 'failed', mcp: 'error' },
  unavailable: { http: 503, record: 'failed', mcp: 'error' },
  too_many_requests: { http: 429, record: 'failed', mcp: 'error' },
  internal: { http: 500, record: 'failed', mcp: 'error' },
};

/** The HTTP status of an answer with this outcome. */
export const httpStatus = (kind: OutcomeKind): number => DERIVED[kind].http;

/** The activity record's word for an action that ended so. */
export const recordOutcome = (kind: OutcomeKind): ActionOutcome => DERIVED[kind].record;

/** Whether an MCP tool call failed (a tool error), rather than answered what it found. */
export const isToolError = (kind: OutcomeKind): boolean => DERIVED[kind].mcp === 'error';

/** An error's answer body: its HTTP status, its sentence and its extra fields. */
export const errorBody = (outcome: Outcome): Record<string, unknown> => ({
  status: httpStatus(outcome.kind),
  detail: outcome.detail,
  ...outcome.extra,
});

/** An MCP tool result, as far as the outcome decides it (the SDK's CallToolResult has this shape). */
export interface ToolResultShape {
  [key: string]: unknown;
  isError?: boolean;
  content: { type: 'text'; text: string }[];
  structuredContent?: Record<string, unknown>;
}

/**
 * The MCP result of an outcome: `body` as one JSON text (and as structured content when the tool
 * declares an output schema); a failed request is a tool error whose body, when none is given, is
 * the HTTP answer's (`status`, `detail`, extra fields).
 */
export function toolResult(outcome: Outcome, body?: object, options: { structured?: boolean } = {}): ToolResultShape {
  const answer = body ?? errorBody(outcome);
  const isError = isToolError(outcome.kind);
  return {
    ...(isError && { isError }),
    content: [{ type: 'text', text: JSON.stringify(answer) }],
    // The tool's own body, error or not, matches its output schema; a failure's stand-in body does not.
    ...(options.structured && body && { structuredContent: body as Record<string, unknown> }),
  };
}

/** The outcome kind of a run that ended with this status (`restarted`: stopping it cost the kernel's state). */
export function runKind(status: RunOutcome, restarted?: boolean): RunEnd {
  switch (status) {
    case 'succeeded':
      return 'ok';
    case 'failed':
      return 'failed';
    case 'interrupted':
      return restarted ? 'kernel_restarted' : 'interrupted';
    case 'timed_out':
      return 'timed_out';
  }
}
