import { NO_OUTPUT, type ExecResult, type Kernel, type StreamEvent } from '../model/kernelPort';
import type { KeyedQueue } from '../flow/keyedQueue';
import { errorMessage } from '../errorMessage';

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
      onStream({ name: 'stderr', text: `${errorMessage(error)}\n` });
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
