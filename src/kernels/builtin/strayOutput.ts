import type { StreamName } from '../../core/model/kernelPort';

/** What the kernel printed that belonged to no active run. */
export interface StrayOutput {
  /** Pieces of output (messages) that reached no run. */
  count: number;
  chars: number;
  /** The last STRAY_TAIL_CHARS characters of it. */
  tail: string;
}

const STRAY_TAIL_CHARS = 8192;
/** Logged at most this often: a leaking thread may print in a loop. */
const STRAY_LOG_INTERVAL_MS = 1000;

/**
 * Output of no active run (threads and subprocesses of runs that ended, output between runs):
 * never given to another run, but counted, its end kept, and logged (at most once a second).
 */
export class StrayOutputRecord {
  private count = 0;
  private chars = 0;
  private tail = '';
  private loggedAt = 0;

  constructor(private readonly log: ((line: string) => void) | undefined) {}

  add(name: StreamName, text: string, why: string): void {
    this.count++;
    this.chars += text.length;
    this.tail = (this.tail + text.slice(-STRAY_TAIL_CHARS)).slice(-STRAY_TAIL_CHARS);
    const now = Date.now();
    if (now - this.loggedAt < STRAY_LOG_INTERVAL_MS) return;
    this.loggedAt = now;
    this.log?.(
      `kernel ${name} of no active run (${why}; ${this.count} pieces, ${this.chars} characters so far, given to no run): ${text.slice(0, 200)}`,
    );
  }

  get snapshot(): StrayOutput {
    return { count: this.count, chars: this.chars, tail: this.tail };
  }
}
