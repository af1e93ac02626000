/**
 * Where the time of one cell write goes, for the benchmark only: the cell rules' planning, the
 * check of the written code, our code up to `workspace.applyEdit`, applyEdit's round trip
 * (extension host → workbench → back; of it, the extension host's CPU time, which holds every
 * change listener, ours too, and when the extension host's document first showed the change),
 * and our code after it (checkpoint, the answer). Off unless a sink
 * is given (the bench sets one): then each write takes a few clock and CPU readings.
 */

export type EditKind = 'insert' | 'edit' | 'other';

/** One write's parts, ms. */
export interface EditSpan {
  kind: EditKind;
  /** From the write's turn in its notebook's queue to the code check: reading and planning. */
  plan: number;
  /** The check of the written Python (the analyzer; cached by text). */
  check: number;
  /** From the check to the applyEdit call. */
  before: number;
  /** applyEdit's await, whole. */
  applyEdit: number;
  /** The extension host's CPU time (user + system) during that await. */
  hostCpu: number;
  /** From the applyEdit call to the extension host's document first showing the change (NaN: not seen). */
  shown: number;
  /** From applyEdit's answer to the write's answer. */
  after: number;
}

export interface SpanClock {
  /** Wall time, ms. */
  now(): number;
  /** This process's CPU time so far, ms. */
  cpu(): number;
}

const processClock: SpanClock = {
  now: () => performance.now(),
  cpu: () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  },
};

/** The marks of one write, in order; `end` reports it (a write that applied nothing is not reported). */
export interface EditStopwatch {
  checking(): void;
  checked(): void;
  applying(): void;
  /** The extension host's document shows the change (the first call counts). */
  shown(): void;
  applied(): void;
  end(kind: EditKind): void;
}

const OFF: EditStopwatch = {
  checking: () => undefined,
  checked: () => undefined,
  applying: () => undefined,
  shown: () => undefined,
  applied: () => undefined,
  end: () => undefined,
};

export class EditSpans {
  constructor(
    /** Receives each write's span; undefined: nothing is measured. */
    private readonly sink: ((span: EditSpan) => void) | undefined,
    private readonly clock: SpanClock = processClock,
  ) {}

  start(): EditStopwatch {
    const sink = this.sink;
    if (!sink) return OFF;
    const { clock } = this;
    const t0 = clock.now();
    const at = { checking: NaN, checked: NaN, applying: NaN, shown: NaN, applied: NaN, cpu0: NaN, cpu1: NaN };
    return {
      checking: () => (at.checking = clock.now()),
      checked: () => (at.checked = clock.now()),
      applying: () => {
        at.applying = clock.now();
        at.cpu0 = clock.cpu();
      },
      shown: () => {
        if (Number.isNaN(at.shown)) at.shown = clock.now();
      },
      applied: () => {
        at.cpu1 = clock.cpu();
        at.applied = clock.now();
      },
      end: (kind) => {
        if (Number.isNaN(at.applied)) return;
        sink({
          kind,
          plan: at.checking - t0,
          check: at.checked - at.checking,
          before: at.applying - at.checked,
          applyEdit: at.applied - at.applying,
          hostCpu: at.cpu1 - at.cpu0,
          shown: at.shown - at.applying,
          after: clock.now() - at.applied,
        });
      },
    };
  }
}

/** An edit that adds new cells (not copies) is an insert; one that changes only cells' text is an edit. */
export function editKind(change: {
  splices: readonly { cells: readonly { copyOf?: number }[] }[];
  texts: readonly unknown[];
  metadata: readonly unknown[];
}): EditKind {
  if (change.splices.some((s) => s.cells.some((c) => c.copyOf === undefined))) return 'insert';
  if (change.texts.length && !change.splices.length && !change.metadata.length) return 'edit';
  return 'other';
}
