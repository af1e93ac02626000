import type { StreamEvent } from '../model/kernelPort';
import { RollingTail } from '../text/rollingTail';

/**
 * What the capped answer of a run carries of its printed output, by default: head and tail, half
 * each. About 10k tokens of an agent's context, and few enough lines that marimo-pair's bash
 * reader adds well under a second to the run.
 */
export const SCRATCHPAD_OUTPUT_CAP = 40_000;

/**
 * The printed output of a run, capped as it streams: the first half of `cap` goes out as it
 * arrives (`push` returns it), the last half is held (`finish` returns it), and the middle is
 * cut. Cuts fall at line ends where the text has one. Which stream each piece came from is kept.
 */
export class OutputCap {
  private headChars = 0;
  private headDone = false;
  private printed = 0;
  private readonly tail: RollingTail<StreamEvent>;

  constructor(private readonly cap: number) {
    this.tail = new RollingTail(Math.floor(cap / 2), (piece, text) => ({ name: piece.name, text }));
  }

  /** The part of `event` to send now (the head), if any. */
  push(event: StreamEvent): StreamEvent | undefined {
    this.printed += event.text.length;
    if (this.headDone) {
      this.tail.push(event);
      return undefined;
    }
    const room = Math.ceil(this.cap / 2) - this.headChars;
    if (event.text.length <= room) {
      this.headChars += event.text.length;
      return event;
    }
    this.headDone = true;
    const lineEnd = event.text.lastIndexOf('\n', room - 1);
    // No line end within room: the head ends where the previous piece did (a print's end), or
    // mid-line when this is the first piece.
    const take = lineEnd >= 0 ? lineEnd + 1 : this.headChars > 0 ? 0 : room;
    this.headChars += take;
    this.tail.push({ name: event.name, text: event.text.slice(take) });
    return take ? { name: event.name, text: event.text.slice(0, take) } : undefined;
  }

  /**
   * The held tail, starting at a line start where it can, and how much was cut between head and
   * tail (0: nothing was, the tail is simply the rest).
   */
  finish(): { tail: StreamEvent[]; cutChars: number; headChars: number; printed: number } {
    const tail = this.tail.kept();
    if (this.tail.droppedChars > 0 && tail.length) {
      const first = tail[0]!;
      const lineStart = first.text.indexOf('\n') + 1;
      if (lineStart > 0) tail[0] = { name: first.name, text: first.text.slice(lineStart) };
    }
    const tailChars = tail.reduce((n, e) => n + e.text.length, 0);
    return {
      tail: tail.filter((e) => e.text),
      cutChars: this.printed - this.headChars - tailChars,
      headChars: this.headChars,
      printed: this.printed,
    };
  }
}
