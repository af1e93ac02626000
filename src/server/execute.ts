import type { IncomingMessage, ServerResponse } from 'node:http';
import { BridgeError } from '../core/bridgeError';
import type { KeyedQueue } from '../core/flow/keyedQueue';
import { SCRATCHPAD_OUTPUT_CAP } from '../core/outputs/outputCap';
import { CappedOutput, type ScratchpadOutputs } from '../core/outputs/scratchpadOutputs';
import { runScratchpad } from '../core/runs/scratchpadRuns';
import type { NotebookHost } from '../core/model/notebookHost';
import type { RiskChecks } from '../core/cells/riskChecks';
import { riskField, type RiskReport } from '../core/model/riskScan';
import { DEFAULT_LIMITS, openEventStream, type StreamLimits } from './sse';

export interface ExecuteOptions {
  limits?: StreamLimits;
  /** Characters of printed output the answer carries, head and tail (Infinity: all of it). */
  cap?: number;
}

/**
 * marimo's `POST /api/kernel/execute`: validate the session and rule on the code's risk scan
 * before the stream starts (errors are JSON), then stream stdout/stderr and exactly one `done`
 * (with `risk` when the scan found something). Runs of one session wait their turn with the 200
 * already sent; a client that goes away, or stops reading, interrupts its run.
 *
 * Printed output is capped (OutputCap): its head streams as it comes, its tail follows at the
 * end after a note that says how much was cut and where the whole output is kept
 * (ScratchpadOutputs); every event carries at most MAX_EVENT_CHARS characters.
 */
export async function serveExecute(
  code: string,
  req: IncomingMessage,
  res: ServerResponse,
  deps: { host: NotebookHost; runs: KeyedQueue; outputs: ScratchpadOutputs; risk: RiskChecks },
  opts: ExecuteOptions = {},
): Promise<void> {
  const sessionId = sessionOf(req);
  const kernel = await deps.host.kernelFor(sessionId);
  const risk = await deps.risk.vet(sessionId, [{ code }]);

  const abort = new AbortController();
  const stream = openEventStream(res, { ...(opts.limits ?? DEFAULT_LIMITS), onStall: () => abort.abort() });
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const printed = new CappedOutput(deps.outputs, opts.cap ?? SCRATCHPAD_OUTPUT_CAP);
  const result = await runScratchpad(
    deps.runs,
    sessionId,
    kernel,
    code,
    (e) => {
      const head = printed.push(e);
      if (head) stream.sendText(head.name, head.text);
    },
    abort.signal,
  );
  for (const e of printed.finish((path) => `http://${req.headers.host}${path}`)) stream.sendText(e.name, e.text);
  if (result) stream.end('done', { ...result, ...riskField(risk) });
  else stream.end();
}

/** `dryRun: true` on execute: the risk scan of the code in that session's notebook; nothing runs. */
export async function dryRunExecute(
  code: string,
  req: IncomingMessage,
  deps: { host: NotebookHost; risk: RiskChecks },
): Promise<{ dryRun: true; risk: RiskReport }> {
  const sessionId = sessionOf(req);
  if (!(await deps.host.sessions()).some((s) => s.id === sessionId))
    throw new BridgeError('not_found', `Invalid session id: ${sessionId} (GET /api/sessions lists them)`);
  return { dryRun: true, risk: await deps.risk.scan(sessionId, [{ code }]) };
}

function sessionOf(req: IncomingMessage): string {
  const sessionId = req.headers['marimo-session-id'];
  if (typeof sessionId !== 'string' || !sessionId) throw new BridgeError('bad_input', 'Missing Marimo-Session-Id header');
  return sessionId;
}
