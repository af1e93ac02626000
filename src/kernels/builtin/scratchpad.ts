import { NO_OUTPUT, reduceMimeBundle, type ExecResult, type Kernel, type StreamEvent } from '../../core/kernel';
import type { KernelProcess } from './kernelProcess';

/**
 * The builtin kernel as a scratchpad `Kernel`. Errors become their plain-text traceback on
 * stderr; display outputs (figures) have no place in a scratchpad result and are dropped.
 */
export class BuiltinScratchpad implements Kernel {
  readonly kind = 'builtin';

  constructor(private readonly kernel: KernelProcess) {}

  async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
    const result = await this.kernel.run(
      code,
      'scratchpad',
      (o) => {
        if (o.kind === 'stream') onStream({ name: o.name, text: o.text });
        else if (o.kind === 'error')
          onStream({ name: 'stderr', text: o.traceback.endsWith('\n') ? o.traceback : `${o.traceback}\n` });
      },
      signal,
    );
    if (result.success) return { success: true, status: 'succeeded', output: reduceMimeBundle(result.value) };
    return { success: false, status: result.status, ...(result.restarted && { restarted: true }), output: NO_OUTPUT };
  }
}
