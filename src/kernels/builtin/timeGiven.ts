/**
 * How much time a process has been given to do something, counted so that a loaded machine does
 * not shorten it: while the process's main thread runs, or waits for a CPU, only the CPU time it
 * got counts; while it sleeps (it chose to wait: for a timer, a pipe, a signal it ignores) the
 * clock counts. A kernel that compiles a large cell at load 25 has had 0.2 s when the clock says
 * 2.5 s; one that sleeps through SIGINT has had 2 s after 2 s.
 *
 * Linux reads /proc/<pid>/task/<pid>/stat (the main thread's state and CPU time). Elsewhere, or
 * when the process cannot be read, the clock counts.
 */
import * as fs from 'node:fs';

/** Linux's USER_HZ: the unit of utime and stime in /proc, 100 on every Linux port. */
const TICKS_PER_SECOND = 100;

export interface Sample {
  sleeping: boolean;
  /** CPU time of the main thread, ms. */
  cpu: number;
}

export class TimeGiven {
  private given = 0;
  private last: Sample | undefined;
  private lastAt: number;

  /** `sample`: the process's state now (undefined: unknown, the clock counts); `now`: the clock. */
  constructor(
    private readonly sample: () => Sample | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.last = sample();
    this.lastAt = now();
  }

  /** The main thread of process `pid`, while it is in process group `group` (its pid could be another's by now). */
  static of(pid: number | undefined, group: number | undefined): TimeGiven {
    return new TimeGiven(() => mainThread(pid, group));
  }

  /** Milliseconds given since construction; call it now and then (each call measures since the last). */
  read(): number {
    const now = this.now();
    const next = this.sample();
    const prev = this.last;
    const asleep = !next || !prev || (prev.sleeping && next.sleeping);
    this.given += asleep ? now - this.lastAt : Math.max(0, next.cpu - prev.cpu);
    this.last = next;
    this.lastAt = now;
    return this.given;
  }
}

function mainThread(pid: number | undefined, group: number | undefined): Sample | undefined {
  if (process.platform !== 'linux' || pid === undefined) return undefined;
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  return parseStat(text, group);
}

/** `pid (comm) state ppid pgrp ... utime stime ...` (proc(5)); undefined if not in `group`. */
export function parseStat(text: string, group: number | undefined): Sample | undefined {
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const [state, , pgrp] = fields;
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!state || !Number.isFinite(utime) || !Number.isFinite(stime)) return undefined;
  if (group !== undefined && Number(pgrp) !== group) return undefined;
  return { sleeping: state !== 'R', cpu: ((utime + stime) * 1000) / TICKS_PER_SECOND };
}
