import { BridgeError } from '../../../src/core/bridgeError';
import type { ExecResult, Kernel, KernelStatus, StreamEvent } from '../../../src/core/model/kernelPort';
import type { KernelChoice, NotebookHost, SessionInfo, StartedKernel } from '../../../src/core/model/notebookHost';
import { sleep } from '../../../src/core/sleep';

/** A scripted step of a fake run: emit a stream event, wait, or finish. */
export type FakeStep = StreamEvent | { waitMs: number } | { waitForAbort: true } | { throws: string };

/**
 * Fake kernel for HTTP contract tests (no python, no VS Code): plays a script for each code
 * string and records what it was asked, so tests can assert ordering and aborts.
 */
export class FakeKernel implements Kernel {
  readonly kind = 'fake';
  status = (): KernelStatus => ({ state: this.calls.some((c) => !c.ended) ? 'busy' : 'idle' });
  readonly calls: { code: string; started: number; ended: number; aborted: boolean }[] = [];
  constructor(private readonly scripts: Record<string, { steps: FakeStep[]; result: ExecResult }>) {}

  async executeScratchpad(code: string, onStream: (e: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
    const call = { code, started: Date.now(), ended: 0, aborted: false };
    this.calls.push(call);
    const script = this.scripts[code] ?? {
      steps: [],
      result: { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } },
    };
    for (const step of script.steps) {
      if ('waitMs' in step) await sleep(step.waitMs);
      else if ('waitForAbort' in step) {
        await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve())));
        call.aborted = true;
        call.ended = Date.now();
        return { success: false, status: 'interrupted', output: { mimetype: 'text/plain', data: '' } };
      } else if ('throws' in step) throw new Error(step.throws);
      else onStream(step);
    }
    call.ended = Date.now();
    return script.result;
  }
}

/** Fake notebook host: fixed sessions, each with its fake kernel (or none). */
export class FakeNotebookHost implements NotebookHost {
  constructor(private readonly entries: { info: SessionInfo; kernel?: Kernel }[]) {}
  async sessions(): Promise<SessionInfo[]> {
    return this.entries.filter((e) => e.kernel).map((e) => e.info);
  }
  async kernelFor(sessionId: string): Promise<Kernel> {
    const entry = this.entries.find((e) => e.info.id === sessionId);
    if (!entry) throw new BridgeError('not_found', `Invalid session id: ${sessionId}`);
    if (!entry.kernel) throw new BridgeError('conflict', 'No kernel is selected');
    return entry.kernel;
  }
  async open(path: string): Promise<SessionInfo> {
    const entry = this.entries.find((e) => e.info.path === path);
    if (!entry) throw new BridgeError('not_found', `Cannot open notebook ${path}`);
    return entry.info;
  }
  /** Entries with a kernel "start" at once; the others cannot. */
  async startKernel(notebook: string, kernel: KernelChoice): Promise<StartedKernel> {
    const entry = this.entries.find((e) => e.info.id === notebook || e.info.path === notebook);
    if (!entry) throw new BridgeError('not_found', `No open notebook has the session id ${notebook}`);
    if (!entry.kernel) throw new BridgeError('conflict', `Could not start a ${kernel} kernel`);
    return { session: entry.info, kernel: entry.kernel.kind };
  }
}
