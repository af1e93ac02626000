import { RollingTail } from './rollingTail';

/** The note that stands where the middle of a long text was cut. */
export const cutNote = (chars: number) => `\n[agent-bridge: ${chars} characters cut here]\n`;

/**
 * Keeps the start and the end of a text that arrives in pieces, at most `cap` characters of it
 * (half each), whatever its length: the first lines say what ran, the last ones how it ended.
 */
export class HeadTail {
  private readonly head: string[] = [];
  private headChars = 0;
  private readonly tail: RollingTail<{ text: string }>;

  constructor(private readonly cap: number) {
    this.tail = new RollingTail(Math.floor(cap / 2), (_piece, text) => ({ text }));
  }

  push(text: string): void {
    const headRoom = Math.ceil(this.cap / 2) - this.headChars;
    if (headRoom > 0) {
      const kept = text.slice(0, headRoom);
      this.head.push(kept);
      this.headChars += kept.length;
      text = text.slice(kept.length);
      if (!text) return;
    }
    this.tail.push({ text });
  }

  /** How many characters were cut from the middle. */
  get cutChars(): number {
    return this.tail.droppedChars;
  }

  /** The kept pieces in order, with the cut note between head and tail when something was cut. */
  pieces(): string[] {
    const tail = this.tail.kept().map((p) => p.text);
    return this.cutChars ? [...this.head, cutNote(this.cutChars), ...tail] : [...this.head, ...tail];
  }
}
