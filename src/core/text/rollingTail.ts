/**
 * The last `max` characters of pieces of text that arrive one by one: older pieces fall out whole,
 * or cut at their front. The head-and-tail keepers of scratchpad results and of cell outputs both
 * hold their tail in one of these.
 */
export class RollingTail<P extends { readonly text: string }> {
  /** Pieces from `first` on; the slots before it fell out and hold nothing (their text is freed at once). */
  private pieces: (P | undefined)[] = [];
  private first = 0;
  private chars = 0;
  private dropped = 0;

  /** `cutFront` returns the piece with its text replaced by the part that stays. */
  constructor(
    private readonly max: number,
    private readonly cutFront: (piece: P, text: string) => P,
  ) {}

  push(piece: P): void {
    this.pieces.push(piece);
    this.chars += piece.text.length;
    while (this.chars > this.max) {
      const oldest = this.pieces[this.first]!;
      const excess = this.chars - this.max;
      if (excess >= oldest.text.length) {
        this.pieces[this.first++] = undefined;
        this.chars -= oldest.text.length;
        this.dropped += oldest.text.length;
      } else {
        this.pieces[this.first] = this.cutFront(oldest, oldest.text.slice(excess));
        this.chars -= excess;
        this.dropped += excess;
      }
    }
    // Many small pieces: drop the fallen-out slots now and then, not on every push.
    if (this.first > 1024 && this.first * 2 > this.pieces.length) {
      this.pieces = this.pieces.slice(this.first);
      this.first = 0;
    }
  }

  /** Characters kept. */
  get length(): number {
    return this.chars;
  }

  /** Characters that fell out. */
  get droppedChars(): number {
    return this.dropped;
  }

  /** The kept pieces, oldest first. */
  kept(): P[] {
    return this.pieces.slice(this.first) as P[];
  }
}
