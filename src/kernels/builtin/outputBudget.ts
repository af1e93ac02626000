import type { StreamName } from '../../core/model/kernelPort';
import { RollingTail } from '../../core/text/rollingTail';

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
  private readonly tail: RollingTail<StreamPiece>;

  constructor(
    private readonly headChars = CELL_OUTPUT_HEAD_CHARS,
    private readonly tailMax = CELL_OUTPUT_TAIL_CHARS,
  ) {
    this.tail = new RollingTail(tailMax, (piece, text) => ({ name: piece.name, text }));
  }

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
    const held = now.length ? text.slice(now.length) : text;
    // A piece longer than the whole tail keeps only its end: no need to hold the rest even briefly.
    this.tail.push({ name, text: held.length > this.tailMax ? held.slice(-this.tailMax) : held });
    return now;
  }

  /** After the run: the marker and the tail to show, or null when nothing was held back. */
  finish(): { marker: string; tail: StreamPiece[] } | null {
    if (!this.tail.length) return null;
    const cut = this.total - this.used - this.tail.length;
    const marker = cut
      ? `\n[... ${cut} of ${this.total} characters of output cut by Agent Bridge: a cell keeps the first ${this.headChars} and the last ${this.tailMax} ...]\n`
      : '';
    return { marker, tail: this.tail.kept() };
  }
}
