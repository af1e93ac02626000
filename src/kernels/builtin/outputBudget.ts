import type { StreamName } from '../../core/kernel';

/** Stream output a cell shows as it comes, at most (characters). */
export const CELL_OUTPUT_HEAD_CHARS = 512 * 1024;
/** Stream output kept from the end of a cell's output once it went past the head (characters). */
export const CELL_OUTPUT_TAIL_CHARS = 128 * 1024;

export interface StreamPiece {
  readonly name: StreamName;
  readonly text: string;
}

/**
 * Keeps one run's stream output within head + tail characters: the head passes through as it
 * comes, the rest only feeds a rolling tail, so a `while True: print(...)` cell costs bounded
 * memory in the editor. finish() says how much was cut between the two.
 */
export class OutputBudget {
  private used = 0;
  private total = 0;
  private tail: StreamPiece[] = [];
  private tailChars = 0;

  constructor(
    private readonly headChars = CELL_OUTPUT_HEAD_CHARS,
    private readonly tailMax = CELL_OUTPUT_TAIL_CHARS,
  ) {}

  /** The part of `text` to show now; what does not fit in the head is held for the tail. */
  take(name: StreamName, text: string): string {
    this.total += text.length;
    const room = this.headChars - this.used;
    if (text.length <= room) {
      this.used += text.length;
      return text;
    }
    const now = room > 0 ? text.slice(0, room) : '';
    this.used = this.headChars;
    this.hold(name, now.length ? text.slice(now.length) : text);
    return now;
  }

  /** After the run: the marker and the tail to show, or null when nothing was held back. */
  finish(): { marker: string; tail: StreamPiece[] } | null {
    if (!this.tail.length) return null;
    const cut = this.total - this.used - this.tailChars;
    const marker = cut
      ? `\n[... ${cut} of ${this.total} characters of output cut by Agent Bridge: a cell keeps the first ${this.headChars} and the last ${this.tailMax} ...]\n`
      : '';
    return { marker, tail: this.tail };
  }

  private hold(name: StreamName, text: string): void {
    const kept = text.length > this.tailMax ? text.slice(-this.tailMax) : text;
    this.tail.push({ name, text: kept });
    this.tailChars += kept.length;
    while (this.tailChars > this.tailMax) {
      const first = this.tail[0]!;
      const excess = this.tailChars - this.tailMax;
      if (first.text.length <= excess) {
        this.tail.shift();
        this.tailChars -= first.text.length;
      } else {
        this.tail[0] = { name: first.name, text: first.text.slice(excess) };
        this.tailChars -= excess;
      }
    }
  }
}
