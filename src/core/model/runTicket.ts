/** Where a cell run is. */
export interface Disposable {
  dispose(): void;
}

export type RunPhase = 'queued' | 'running' | 'ended';

/** How a ticket settled: its run ended, or its cell or notebook went away before it did. */
export type TicketEnd = 'ended' | 'gone';

/**
 * One cell run, whichever kernel provider runs it: started, outputs, ended. A provider's own
 * controller fills it from its steps; runs through VS Code's command are filled from the
 * document's changes in one place. Everything that waits on a run reads its ticket, any number
 * of times (a wait that timed out can wait again, by run id).
 */
export interface RunTicket {
  readonly runId: string;
  readonly cellId: string;
  readonly phase: RunPhase;
  /** Settles once, when the run ended (its cell then shows the end) or its cell or notebook went away. */
  readonly ended: Promise<TicketEnd>;
  /** Fires at each step of the run: started, outputs changed, ended. */
  onDidChange(listener: () => void): Disposable;
}

/** A ticket filled by whoever runs the cell: `step` moves it on, `drop` settles it as gone. */
export class Ticket implements RunTicket {
  private current: RunPhase = 'queued';
  private settle: (end: TicketEnd) => void = () => {};
  readonly ended = new Promise<TicketEnd>((resolve) => (this.settle = resolve));
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly runId: string,
    readonly cellId: string,
  ) {}

  get phase(): RunPhase {
    return this.current;
  }

  get open(): boolean {
    return this.current !== 'ended';
  }

  onDidChange(listener: () => void): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** The run moved on (or, with the same phase, its outputs changed). Steps after the end are ignored. */
  step(phase: RunPhase): void {
    if (!this.open) return;
    this.current = phase;
    for (const listener of [...this.listeners]) listener();
    if (phase === 'ended') this.close('ended');
  }

  /** The cell or notebook went away before the run ended. */
  drop(): void {
    if (!this.open) return;
    this.current = 'ended';
    this.close('gone');
  }

  private close(end: TicketEnd): void {
    this.listeners.clear();
    this.settle(end);
  }
}

/** Run ids: unique in this window, short enough to read back. */
export function runIdMinter(): () => string {
  let n = 0;
  const prefix = Math.random().toString(36).slice(2, 6);
  return () => `run_${prefix}${(++n).toString(36)}`;
}
