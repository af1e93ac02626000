/** What the benchmark reads of the machine: a process's resident memory, and how busy the CPUs are. */
import * as fs from 'node:fs';
import { sleep } from '../../src/core/sleep';

/** VmRSS of a process, in MB. */
export function rssMb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** Median of a few samples: a process's resting level before a measurement. */
export async function restingRssMb(pid: number): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < 5; i++, await sleep(20)) values.push(rssMb(pid));
  return values.sort((a, b) => a - b)[2]!;
}

function cpuTimes(): { busy: number; total: number } {
  // cpu  user nice system idle iowait irq softirq steal ...
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}

/**
 * Waits until under `busyBelow` of all CPUs are busy over half a second (VS Code lays out what was
 * just opened for seconds; timings taken meanwhile measure that), or `maxMs` passed.
 */
export async function waitForQuiet(
  busyBelow: number,
  maxMs: number,
): Promise<{ busy: number; waitedMs: number; quiet: boolean }> {
  const start = performance.now();
  let busy = 1;
  while (performance.now() - start < maxMs) {
    const a = cpuTimes();
    await sleep(500);
    const b = cpuTimes();
    busy = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (busy < busyBelow) return { busy, waitedMs: performance.now() - start, quiet: true };
  }
  return { busy, waitedMs: performance.now() - start, quiet: false };
}

/** A process's CPU time so far (user + system), ms; 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    // pid (comm) state ppid ... utime stime: fields 14 and 15, counted after the command's ")".
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}
/** Linux's USER_HZ, the unit of /proc's CPU times (100 on every architecture Node runs on here). */
const CLOCK_TICKS = 100;

/** Where a sandbox's processes spend CPU, by role. */
export type CpuByRole = Record<'extensionHost' | 'renderer' | 'kernel' | 'other', number>;

/** The role of one of a sandbox's processes, from its command line. */
export function roleOf(cmdline: string): keyof CpuByRole {
  if (/--type=extensionHost\b/.test(cmdline)) return 'extensionHost';
  if (/--type=renderer\b/.test(cmdline)) return 'renderer';
  if (/\b(kernel|runner)\.py\b/.test(cmdline)) return 'kernel';
  return 'other';
}

/** CPU ms so far of each role among `procs`. */
export function cpuByRole(procs: readonly { pid: number; cmdline: string }[]): CpuByRole {
  const sum: CpuByRole = { extensionHost: 0, renderer: 0, kernel: 0, other: 0 };
  for (const p of procs) sum[roleOf(p.cmdline)] += cpuMs(p.pid);
  return sum;
}
