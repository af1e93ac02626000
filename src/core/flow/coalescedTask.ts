/**
 * A task that runs one at a time, with calls folded together: a call while it runs makes one
 * more run after it (however many came), and `soon()` waits a moment first, so a burst of
 * triggers (a Run All changes its cells hundreds of times) costs one or two runs, not one each.
 */
export class CoalescedTask {
  private running: Promise<void> | undefined;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly task: () => Promise<void>,
    /** How long `soon()` gathers triggers before running. */
    private readonly delayMs: number,
    /** Where a failed run triggered by `soon()` is told (a `now()` caller gets the rejection). */
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Runs the task now, or once more after the run under way; resolves when a run that started after this call ended. */
  now(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) this.again = true;
    else this.running = this.loop();
    return this.running;
  }

  /** Runs the task after the delay, folding in every call until then. */
  soon(): void {
    if (this.timer || (this.running && this.again)) return;
    this.timer = setTimeout(() => this.now().catch(this.onError), this.delayMs);
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async loop(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.task();
      } while (this.again);
    } finally {
      this.running = undefined;
    }
  }
}
