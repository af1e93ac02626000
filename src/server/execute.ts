import type { IncomingMessage, ServerResponse } from 'node:http';
import { BridgeError } from '../core/errors';
import type { KeyedQueue } from '../core/keyedQueue';
import { runScratchpad } from '../core/scratchpadRuns';
import type { NotebookHost } from '../core/sessions';
import { DEFAULT_LIMITS, openEventStream, type StreamLimits } from './sse';

/**
 * marimo's `POST /api/kernel/execute`: validate the session before the stream starts (errors
 * are JSON), then stream stdout/stderr and exactly one `done`. Runs of one session wait their
 * turn with the 200 already sent; a client that goes away, or stops reading, interrupts its run.
 */
export async function serveExecute(
  code: string,
  req: IncomingMessage,
  res: ServerResponse,
  deps: { host: NotebookHost; runs: KeyedQueue },
  limits: StreamLimits = DEFAULT_LIMITS,
): Promise<void> {
  const sessionId = req.headers['marimo-session-id'];
  if (typeof sessionId !== 'string' || !sessionId) throw new BridgeError(400, 'Missing Marimo-Session-Id header');
  const kernel = await deps.host.kernelFor(sessionId);

  const abort = new AbortController();
  const stream = openEventStream(res, { ...limits, onStall: () => abort.abort() });
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const result = await runScratchpad(
    deps.runs,
    sessionId,
    kernel,
    code,
    (e) => stream.send(e.name, { data: e.text }),
    abort.signal,
  );
  if (result) stream.end('done', result);
  else stream.end();
}
