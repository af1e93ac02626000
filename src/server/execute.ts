import type { IncomingMessage, ServerResponse } from 'node:http';
import { BridgeError } from '../core/errors';
import { NO_OUTPUT, type ExecResult, type Kernel, type StreamEvent } from '../core/kernel';
import type { KeyedQueue } from '../core/keyedQueue';
import type { NotebookHost } from '../core/sessions';
import { openEventStream } from './sse';

/**
 * One scratchpad run in its session's turn: the single path every transport (HTTP execute, MCP
 * execute_code) takes, so runs of one notebook never overlap whoever sent them. Resolves null,
 * at once, when `signal` is aborted before the run's turn came: the queued task then skips itself.
 */
export function runScratchpad(
  runs: KeyedQueue,
  sessionId: string,
  kernel: Kernel,
  code: string,
  onStream: (event: StreamEvent) => void,
  signal: AbortSignal,
): Promise<ExecResult | null> {
  let started = false;
  const waits = runs.busy(sessionId);
  const turn = runs.run(sessionId, async () => {
    if (signal.aborted) return null;
    started = true;
    try {
      return await kernel.executeScratchpad(code, onStream, signal);
    } catch (error) {
      // A kernel that throws instead of reporting (adapter bug, extension gone) still ends the
      // run the way clients expect: the reason on stderr, then a failed result.
      onStream({ name: 'stderr', text: `${error instanceof Error ? error.message : String(error)}\n` });
      return { success: false, status: 'failed' as const, output: NO_OUTPUT };
    }
  });
  // An idle session starts the run on the next microtask, before any abort (an event) can come.
  if (!waits) return turn;
  const dropped = new Promise<null>((resolve) => {
    const drop = () => {
      if (!started) resolve(null);
    };
    if (signal.aborted) drop();
    signal.addEventListener('abort', drop, { once: true });
    const cleanup = () => signal.removeEventListener('abort', drop);
    turn.then(cleanup, cleanup);
  });
  return Promise.race([turn, dropped]);
}

/**
 * marimo's `POST /api/kernel/execute`: validate the session before the stream starts (errors
 * are JSON), then stream stdout/stderr and exactly one `done`. Runs of one session wait their
 * turn with the 200 already sent; a client that goes away interrupts its run.
 */
export async function executeScratchpad(
  code: string,
  req: IncomingMessage,
  res: ServerResponse,
  deps: { host: NotebookHost; runs: KeyedQueue },
): Promise<void> {
  const sessionId = req.headers['marimo-session-id'];
  if (typeof sessionId !== 'string' || !sessionId) throw new BridgeError(400, 'Missing Marimo-Session-Id header');
  const kernel = await deps.host.kernelFor(sessionId);

  const stream = openEventStream(res);
  const abort = new AbortController();
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
