/**
 * Scratchpad runs as an agent action: capped by the person's run limit, stopped by "Stop
 * Agents", and their outcome and the head of their output noted on the action's Activity. The
 * kernel sees one extra abort signal; nothing is done per output chunk but a bounded append.
 */
import type { Activity } from './access';
import type { ExecResult, Kernel, RunOutcome, StreamEvent } from './kernel';
import type { NotebookHost } from './sessions';

type Outcome = ExecResult & { readonly status?: RunOutcome };

/** The words a capped run's stderr and outcome carry (MCP results are read for them). */
export const RUN_LIMIT_DETAIL = 'limit the person set (agentBridge.access.maxRunSeconds)';

/** The host whose kernels run under `activity` (null: a transport whose actions are recorded elsewhere). */
export function agentHost(host: NotebookHost, activity: Activity | null, maxRunMs: number): NotebookHost {
  return {
    sessions: () => host.sessions(),
    open: (path, options) => host.open(path, options),
    kernelFor: async (sessionId) => agentKernel(await host.kernelFor(sessionId), activity, maxRunMs),
  };
}

export function agentKernel(kernel: Kernel, activity: Activity | null, maxRunMs: number): Kernel {
  return {
    kind: kernel.kind,
    async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
      // One controller fed by listeners, not AbortSignal.any (~0.3 ms per run on Node 20).
      const stop = new AbortController();
      const abort = () => stop.abort();
      if (signal.aborted) stop.abort();
      else signal.addEventListener('abort', abort, { once: true });
      let stopped = false;
      const unlisten = activity?.onStop(() => {
        stopped = true;
        stop.abort();
      });
      let capped = false;
      const timer =
        maxRunMs > 0
          ? setTimeout(() => {
              capped = true;
              stop.abort();
            }, maxRunMs)
          : undefined;
      const stream = activity
        ? (event: StreamEvent) => {
            activity.note(event.text);
            onStream(event);
          }
        : onStream;
      let result: Outcome;
      try {
        result = await kernel.executeScratchpad(code, stream, stop.signal);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', abort);
        unlisten?.();
      }
      if (capped) {
        const detail = `The run reached the ${maxRunMs / 1000} s ${RUN_LIMIT_DETAIL} and was interrupted`;
        onStream({ name: 'stderr', text: `${detail}\n` });
        activity?.settle('timed_out', detail);
        return { ...result, success: false, status: 'timed_out' } as Outcome;
      }
      if (activity && stopped) {
        const detail = 'The person stopped every agent run (Agent Bridge: Stop Agents)';
        onStream({ name: 'stderr', text: `${detail}\n` });
        activity.settle('interrupted', detail);
        return { ...result, success: false, status: 'interrupted' } as Outcome;
      }
      activity?.note(result.output.data);
      activity?.settle(result.status ?? (signal.aborted ? 'interrupted' : result.success ? 'succeeded' : 'failed'));
      return result;
    },
  };
}
