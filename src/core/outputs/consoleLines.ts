import type { StreamEvent, StreamName } from '../model/kernelPort';

/**
 * A run's console (stdout and stderr, as one terminal shows them) kept in lines where it matters:
 * a block such as a traceback starts on a line of its own when the console is mid-line (after a
 * `print(..., end="")`, or marimo's one-line error message), and ends with a line break.
 */
export class ConsoleLines {
  private midLine = false;

  constructor(private readonly emit: (event: StreamEvent) => void) {}

  /** Printed text, as it came. */
  text(event: StreamEvent): void {
    if (!event.text) return;
    this.midLine = !event.text.endsWith('\n');
    this.emit(event);
  }

  /** Text that stands on lines of its own. */
  block(name: StreamName, text: string): void {
    if (!text) return;
    const own = `${this.midLine ? '\n' : ''}${text}${text.endsWith('\n') ? '' : '\n'}`;
    this.midLine = false;
    this.emit({ name, text: own });
  }
}
