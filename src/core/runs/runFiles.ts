/**
 * The workspace files a run created or changed, read off one walk of the workspace made after it
 * ended: those whose modification (or creation) time falls within the run. No walk as a run
 * starts, and none that its answer waits for: walks happen in the background once runs pause
 * (one walk answers every run ended before it began), or when a run's files are asked for. No vscode.
 */

/** A file under the workspace a run created or changed. */
export interface ChangedFile {
  readonly path: string;
  /** `written`: created or changed; the file system keeps no creation time to tell which. */
  readonly change: 'created' | 'changed' | 'written';
  readonly bytes: number;
  /** ISO time it was last modified. */
  readonly modifiedAt: string;
}

/** The files a run created or changed, newest first and bounded. */
export interface RunFiles {
  readonly files: readonly ChangedFile[];
  /** False when some may be missing; `reason` says why (a walk cut short, more files than are listed, no workspace). */
  readonly complete: boolean;
  readonly reason?: string;
}

/** A file as a walk saw it (milliseconds since the epoch; `bornMs` 0: the file system keeps no creation time). */
export interface SeenFile {
  readonly mtimeMs: number;
  readonly bornMs: number;
  readonly size: number;
}

/** What one walk of the workspace saw. */
export interface WorkspaceSnapshot {
  /** When the walk began: it answers for runs that ended by then. */
  readonly startedAt: number;
  /** It holds the files modified or created since then only (so a walk keeps little). */
  readonly sinceMs: number;
  readonly files: ReadonlyMap<string, SeenFile>;
  /** Why it stopped before it saw everything; absent: it saw every file it walks. */
  readonly cut?: string;
}

/** A walk of the workspace folders keeping the files written since `sinceMs` (the editor side makes it: it reads the file system). */
export type WorkspaceWalk = (sinceMs: number) => Promise<WorkspaceSnapshot>;

/** Files listed per run at most. */
export const LISTED_FILES = 200;
/**
 * A file's times come from the operating system's coarse clock, up to a tick (4 ms at 250 Hz,
 * 10 ms at 100 Hz) behind the precise one a run's start is read from: so much before a run's
 * start still counts as the run's, unless another run was going on then or began closer to it.
 */
const CLOCK_TICK_MS = 10;

/**
 * How much a run's recorded end may fall before its true one: its start is kept to the
 * millisecond and its duration rounded, so a file it closed as it ended can be timed after it.
 */
const RECORDED_END_MS = 2;

/** Whether `snapshot` holds every file `run` may have written (its walk kept them since early enough). */
export const answersFor = (snapshot: WorkspaceSnapshot, run: RunWindow) =>
  run.endMs <= snapshot.startedAt && run.startMs - CLOCK_TICK_MS >= snapshot.sinceMs;

/** When a run went on (milliseconds since the epoch). */
export interface RunWindow {
  readonly startMs: number;
  readonly endMs: number;
}

/**
 * The files `snapshot` saw written while `run` went on, newest first, at most `listed`; `others`:
 * the other runs kept, whose time just before this run's start is theirs.
 */
export function filesOf(
  snapshot: WorkspaceSnapshot,
  run: RunWindow,
  others: readonly RunWindow[] = [],
  listed = LISTED_FILES,
): RunFiles {
  // How far the file clock must have lagged at `t` for `w` to have written it (undefined: it
  // could not have). A time is the run's that needs the least lag: the run going on then, else
  // the one that began soonest after it (a file times its writes up to a tick early).
  const lag = (w: RunWindow, t: number) =>
    t > w.endMs + RECORDED_END_MS || t < w.startMs - CLOCK_TICK_MS ? undefined : Math.max(0, w.startMs - t);
  const within = (t: number) => {
    const own = lag(run, t);
    return own !== undefined && others.every((o) => (lag(o, t) ?? Infinity) >= own);
  };
  const found: (ChangedFile & { at: number })[] = [];
  for (const [path, seen] of snapshot.files) {
    // A file copied with its times kept (shutil.copy2, tar) has an old mtime, but a new birth.
    const born = seen.bornMs > 0 && within(seen.bornMs);
    if (!born && !within(seen.mtimeMs)) continue;
    const change = born ? 'created' : seen.bornMs > 0 ? 'changed' : 'written';
    found.push({ path, change, bytes: seen.size, modifiedAt: new Date(seen.mtimeMs).toISOString(), at: seen.mtimeMs });
  }
  found.sort((a, b) => b.at - a.at);
  const reasons = [
    snapshot.cut,
    found.length > listed && `${found.length - listed} more files were written than the ${listed} listed`,
  ].filter((r): r is string => Boolean(r));
  return {
    files: found.slice(0, listed).map(({ at: _a, ...file }) => file),
    complete: reasons.length === 0,
    ...(reasons.length && { reason: reasons.join('; ') }),
  };
}

export interface WalkTiming {
  /** A walk in the background waits until runs have paused this long... */
  readonly quietMs: number;
  /** ...but no longer than this after the first run it answers for ended. */
  readonly latestMs: number;
}

export const WALK_TIMING: WalkTiming = { quietMs: 1_000, latestMs: 10_000 };

interface Queued {
  snapshot: Promise<WorkspaceSnapshot>;
  readonly start: () => void;
  readonly firstAskedAt: number;
  /** The earliest start of the runs it answers for. */
  sinceMs: number;
  timer?: ReturnType<typeof setTimeout>;
  /** Starts as soon as no walk is under way (asked for now, or its wait is over). */
  due?: boolean;
}

/**
 * The walks: one at a time, each shared by all who asked for one while it was waiting. `soon()`
 * (a run ended) waits for runs to pause; `now()` (someone asks for a run's files) starts as soon
 * as the walk under way, if any, is done. Either answers with a walk begun after it was called,
 * holding the files written since `sinceMs` (a clock tick before: see CLOCK_TICK_MS).
 */
export class WalkSchedule {
  private running: Promise<unknown> | undefined;
  private queued: Queued | undefined;

  constructor(
    private readonly walk: WorkspaceWalk,
    private readonly timing: WalkTiming = WALK_TIMING,
  ) {}

  soon(sinceMs: number): Promise<WorkspaceSnapshot> {
    const queued = this.queue(sinceMs);
    if (!queued.due) {
      clearTimeout(queued.timer);
      const wait = Math.min(this.timing.quietMs, queued.firstAskedAt + this.timing.latestMs - Date.now());
      queued.timer = setTimeout(() => this.begin(), Math.max(0, wait));
      queued.timer.unref?.();
    }
    return queued.snapshot;
  }

  now(sinceMs: number): Promise<WorkspaceSnapshot> {
    const queued = this.queue(sinceMs);
    this.begin();
    return queued.snapshot;
  }

  private queue(sinceMs: number): Queued {
    if (this.queued) {
      this.queued.sinceMs = Math.min(this.queued.sinceMs, sinceMs);
      return this.queued;
    }
    let start!: () => void;
    const started = new Promise<void>((resolve) => (start = resolve));
    const queued: Queued = { snapshot: Promise.resolve() as never, start, firstAskedAt: Date.now(), sinceMs };
    queued.snapshot = started.then(() => this.walk(queued.sinceMs - CLOCK_TICK_MS));
    return (this.queued = queued);
  }

  /** Starts the queued walk, or marks it to start when the one under way is done. */
  private begin(): void {
    const queued = this.queued;
    if (!queued) return;
    clearTimeout(queued.timer);
    queued.due = true;
    if (this.running) return;
    this.queued = undefined;
    queued.start();
    this.running = queued.snapshot
      .catch(() => undefined)
      .finally(() => {
        this.running = undefined;
        if (this.queued?.due) this.begin();
      });
  }
}
