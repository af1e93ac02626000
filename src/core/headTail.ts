/** The note that stands where the middle of a long text was cut. */
export const cutNote = (chars: number) => `\n[agent-bridge: ${chars} characters cut here]\n`;

/**
 * Keeps the start and the end of a text that arrives in pieces, at most `cap` characters of it
 * (half each), whatever its length: the first lines say what ran, the last ones how it ended.
 */
export class HeadTail {
  private readonly head: string[] = [];
  private headChars = 0;
  /** Tail pieces from `first` on; the ones before it fell out. */
  private tail: string[] = [];
  private first = 0;
  private tailChars = 0;
  private cut = 0;

  constructor(private readonly cap: number) {}

  push(text: string): void {
    const headRoom = Math.ceil(this.cap / 2) - this.headChars;
    if (headRoom > 0) {
      const kept = text.slice(0, headRoom);
      this.head.push(kept);
      this.headChars += kept.length;
      text = text.slice(kept.length);
      if (!text) return;
    }
    this.tail.push(text);
    this.tailChars += text.length;
    const tailCap = Math.floor(this.cap / 2);
    while (this.tailChars > tailCap) {
      const oldest = this.tail[this.first]!;
      const excess = this.tailChars - tailCap;
      const dropped = Math.min(excess, oldest.length);
      if (dropped === oldest.length) this.first++;
      else this.tail[this.first] = oldest.slice(dropped);
      this.tailChars -= dropped;
      this.cut += dropped;
    }
    // Many small pieces: drop the fallen-out slots now and then, not on every push.
    if (this.first > 1024 && this.first * 2 > this.tail.length) {
      this.tail = this.tail.slice(this.first);
      this.first = 0;
    }
  }

  /** How many characters were cut from the middle. */
  get cutChars(): number {
    return this.cut;
  }

  /** The kept pieces in order, with the cut note between head and tail when something was cut. */
  pieces(): string[] {
    const tail = this.tail.slice(this.first);
    return this.cut ? [...this.head, cutNote(this.cut), ...tail] : [...this.head, ...tail];
  }
}
