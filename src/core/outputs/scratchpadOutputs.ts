import { randomToken } from '../ids';
import type { StreamEvent } from '../model/kernelPort';
import { OutputCap } from './outputCap';

/**
 * The whole printed output of scratchpad runs whose answer was capped, kept for a while so an
 * agent can fetch it by URL (to a file, to grep) instead of reading it in its context. Bounded:
 * each run keeps at most `runChars` characters (the rest is counted, and the entry says it is not
 * complete), all runs together at most `totalChars` (the oldest go first), each for `keepMs`.
 */
export interface KeptOutput {
  readonly id: string;
  readonly text: string;
  /** Characters the run printed, all of them (text holds fewer when `complete` is false). */
  readonly printed: number;
  readonly complete: boolean;
  readonly expiresAt: number;
}

export interface OutputBounds {
  runChars: number;
  totalChars: number;
  keepMs: number;
}

/** A 15 MB print kept whole; two such at most, for ten minutes. */
export const DEFAULT_OUTPUT_BOUNDS: OutputBounds = {
  runChars: 16 * 1024 * 1024,
  totalChars: 32 * 1024 * 1024,
  keepMs: 10 * 60_000,
};

/** One run's output as it arrives, up to the run bound. */
export class OutputRecording {
  private readonly pieces: string[] = [];
  private kept = 0;
  private printed = 0;

  constructor(private readonly runChars: number) {}

  push(text: string): void {
    this.printed += text.length;
    const room = this.runChars - this.kept;
    if (room <= 0) return;
    const piece = text.length > room ? text.slice(0, room) : text;
    this.pieces.push(piece);
    this.kept += piece.length;
  }

  /** Characters printed so far. */
  get chars(): number {
    return this.printed;
  }

  text(): string {
    return this.pieces.join('');
  }
}

/** How many ids of outputs no longer kept are remembered, to tell "expired" from "no such id". */
const GONE_REMEMBERED = 1000;

export class ScratchpadOutputs {
  private readonly entries = new Map<string, KeptOutput>();
  /** Ids of outputs that were kept and are gone (expired, or pushed out by newer ones), oldest first. */
  private readonly gone = new Set<string>();

  constructor(
    readonly bounds: OutputBounds = DEFAULT_OUTPUT_BOUNDS,
    private readonly now: () => number = Date.now,
  ) {}

  record(): OutputRecording {
    return new OutputRecording(this.bounds.runChars);
  }

  /** Keeps a finished recording; returns its entry (the id is unguessable, as the URL is all it takes with the token). */
  keep(recording: OutputRecording): KeptOutput {
    this.expire();
    const text = recording.text();
    const entry: KeptOutput = {
      id: randomToken(9),
      text,
      printed: recording.chars,
      complete: text.length === recording.chars,
      expiresAt: this.now() + this.bounds.keepMs,
    };
    this.entries.set(entry.id, entry);
    let total = [...this.entries.values()].reduce((n, e) => n + e.text.length, 0);
    // Oldest first (a Map iterates in insertion order); the new entry stays, it is within runChars.
    for (const [id, e] of this.entries) {
      if (total <= this.bounds.totalChars || id === entry.id) break;
      this.drop(id);
      total -= e.text.length;
    }
    return entry;
  }

  /** The kept output, `gone` when it was kept and no longer is, undefined when no output had this id. */
  get(id: string): KeptOutput | 'gone' | undefined {
    this.expire();
    return this.entries.get(id) ?? (this.gone.has(id) ? 'gone' : undefined);
  }

  private expire(): void {
    const now = this.now();
    for (const [id, e] of this.entries) if (e.expiresAt <= now) this.drop(id);
  }

  private drop(id: string): void {
    this.entries.delete(id);
    this.gone.add(id);
    for (const old of this.gone) {
      if (this.gone.size <= GONE_REMEMBERED) break;
      this.gone.delete(old);
    }
  }
}

/** Where the whole output of a capped run can be fetched (a row of the route table). */
export const SCRATCHPAD_OUTPUT_PATH = '/notebooks/scratchpad/outputs/:id';

/** The stderr line that stands where a run's printed output was cut. */
export function cappedNote(cut: { cutChars: number; headChars: number }, kept: KeptOutput, url: string): string {
  const minutes = Math.round((kept.expiresAt - Date.now()) / 60_000);
  const whole = kept.complete
    ? `the whole output (${kept.printed} characters) is at ${url}`
    : `its first ${kept.text.length} of ${kept.printed} characters are at ${url}`;
  return `\n[agent-bridge: ${cut.cutChars} characters cut here, after character ${cut.headChars}; ${whole} for ${minutes} minutes (GET with the token)]\n`;
}

/**
 * One scratchpad run's printed output as every transport answers it (HTTP's event stream, MCP
 * execute_code): capped head and tail (OutputCap), the head as it comes (`push` returns it), and
 * at the end (`finish`) the tail, after a note saying what was cut and at which url the whole is
 * kept for a while.
 */
export class CappedOutput {
  private readonly cap: OutputCap;
  private readonly whole: OutputRecording;

  constructor(
    private readonly outputs: ScratchpadOutputs,
    cap: number,
  ) {
    this.cap = new OutputCap(cap);
    this.whole = outputs.record();
  }

  /** The part of `event` to send now, if any. */
  push(event: StreamEvent): StreamEvent | undefined {
    this.whole.push(event.text);
    return this.cap.push(event);
  }

  /** What follows the head: the note where something was cut (its url made by `urlOf`), then the tail. */
  finish(urlOf: (path: string) => string): StreamEvent[] {
    const end = this.cap.finish();
    if (end.cutChars === 0) return end.tail;
    const kept = this.outputs.keep(this.whole);
    const note = cappedNote(end, kept, urlOf(SCRATCHPAD_OUTPUT_PATH.replace(':id', kept.id)));
    return [{ name: 'stderr', text: note }, ...end.tail];
  }
}
