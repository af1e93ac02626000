import {
  NO_OUTPUT,
  reduceMimeBundle,
  type ExecResult,
  type Kernel,
  type KernelStatus,
  type StreamEvent,
} from '../../core/model/kernelPort';
import type { InspectQuery } from '../../core/model/kernelPort';
import { KERNEL_RESTARTED, type KernelProcess } from './kernelProcess';
import { ConsoleLines } from '../../core/outputs/consoleLines';

/**
 * The builtin kernel as a scratchpad `Kernel`, as a request found it. Errors become their
 * plain-text traceback on stderr, on lines of its own; display outputs (figures) have no place in a scratchpad result
 * and are dropped. A run whose turn comes after the kernel was restarted (it waited in the
 * session's queue behind the run whose interrupt escalated) fails instead of running against a
 * kernel whose state is gone.
 */
export class BuiltinScratchpad implements Kernel {
  readonly kind = 'builtin';
  private readonly restarts: number;

  constructor(private readonly kernel: KernelProcess) {
    this.restarts = kernel.restarts;
  }

  status(): KernelStatus {
    return this.kernel.status;
  }

  /** Read beside the runs: the kernel answers even while a cell runs (kernel_inspect.py). */
  inspect(query: InspectQuery): Promise<unknown> {
    return this.kernel.inspect(query);
  }

  async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
    if (this.kernel.restarts !== this.restarts) {
      onStream({
        name: 'stderr',
        text: `${KERNEL_RESTARTED}: The kernel was restarted before this run started; its state (variables, imports) is lost. Run it again if it still applies.\n`,
      });
      return { success: false, status: 'interrupted', restarted: true, output: NO_OUTPUT };
    }
    const lines = new ConsoleLines(onStream);
    const result = await this.kernel.run(
      code,
      'scratchpad',
      (o) => {
        if (o.kind === 'stream') lines.text({ name: o.name, text: o.text });
        else if (o.kind === 'error') lines.block('stderr', o.traceback);
      },
      signal,
    );
    if (result.success) return { success: true, status: 'succeeded', output: reduceMimeBundle(result.value) };
    return { success: false, status: result.status, ...(result.restarted && { restarted: true }), output: NO_OUTPUT };
  }
}
