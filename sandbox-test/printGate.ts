import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SseEvent, SseStream } from './http';

/**
 * Output that must stream, checked without a clock: the code prints each line, then waits until
 * the check has seen it (a file the check makes in a folder of the gate's own), so output held
 * back until the end never lets the run end and the check fails by its timeout, however slow or
 * loaded the machine. The folder must be one the kernel sees (the workspace, not a private /tmp).
 */
export class PrintGate {
  private readonly dir: string;

  constructor(parent: string) {
    this.dir = fs.mkdtempSync(path.join(parent, '.print-gate-'));
  }

  /**
   * Python that prints each of `lines` (flushed) and waits for the check to see it before the next
   * (or for the gate to be disposed: every wait then ends).
   */
  code(lines: readonly string[]): string {
    const dir = JSON.stringify(this.dir);
    return [
      'import os as _gate_os, time as _gate_time',
      `for _gate_i, _gate_line in enumerate(${JSON.stringify(lines)}):`,
      '    print(_gate_line, flush=True)',
      `    while _gate_os.path.isdir(${dir}) and not _gate_os.path.exists(_gate_os.path.join(${dir}, str(_gate_i))):`,
      '        _gate_time.sleep(0.01)',
    ].join('\n');
  }

  /** Opens the gate after each of `lines` as `stream` shows it on stdout (`text`: an event's text). */
  async follow(
    stream: SseStream,
    lines: readonly string[],
    text: (e: SseEvent) => string = (e) => String((e.data as { data?: unknown } | undefined)?.data ?? ''),
    timeoutMs = 30_000,
  ): Promise<void> {
    for (const [i, line] of lines.entries()) {
      const seen = () =>
        stream.events
          .filter((e) => e.event === 'stdout')
          .map(text)
          .join('');
      const hit = await stream.next((e) => e.event === 'stdout' && seen().includes(line), timeoutMs);
      if (!hit) throw new Error(`the stream ended before "${line}" was printed: ${seen().slice(0, 300)}`);
      fs.writeFileSync(path.join(this.dir, String(i)), '');
    }
  }

  dispose(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
