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
