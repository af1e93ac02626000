import type { Request, Response } from 'express';
import { BridgeError } from '../core/errors';
import { NO_OUTPUT } from '../core/kernel';
import type { KeyedQueue } from '../core/keyedQueue';
import type { NotebookHost } from '../core/sessions';
import { openEventStream } from './sse';

/**
 * marimo's `POST /api/kernel/execute`: validate the session before the stream starts (errors
 * are JSON), then stream stdout/stderr and exactly one `done`. Runs of one session wait their
 * turn with the 200 already sent; a client that goes away interrupts its run.
 */
export async function executeScratchpad(
  code: string,
  req: Request,
  res: Response,
  deps: { host: NotebookHost; runs: KeyedQueue },
): Promise<void> {
  const sessionId = req.header('marimo-session-id');
  if (!sessionId) throw new BridgeError(400, 'Missing Marimo-Session-Id header');
  const kernel = await deps.host.kernelFor(sessionId);

  const stream = openEventStream(res);
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  await deps.runs.run(sessionId, async () => {
    if (abort.signal.aborted) return;
    try {
      const result = await kernel.executeScratchpad(code, (e) => stream.send(e.name, { data: e.text }), abort.signal);
      stream.send('done', result);
    } catch (error) {
      // A kernel that throws instead of reporting (adapter bug, extension gone) still ends the
      // stream the way clients expect: the reason on stderr, then a failed done.
      stream.send('stderr', { data: `${error instanceof Error ? error.message : String(error)}\n` });
      stream.send('done', { success: false, output: NO_OUTPUT });
    }
  });
  stream.end();
}
