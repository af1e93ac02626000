/**
 * Waits until the machine is quiet: after opening large notebooks, VS Code's renderer goes on
 * laying them out for seconds, and timings taken meanwhile measure that, not the bridge.
 * "Quiet" is the share of all cores busy over `windowMs` (from /proc/stat) below `busyBelow`.
 */
import * as fs from 'node:fs';

interface CpuTimes {
  busy: number;
  total: number;
}

function cpuTimes(): CpuTimes {
  // cpu  user nice system idle iowait irq softirq steal ...
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

export interface Quiet {
  /** ms waited. */
  waitedMs: number;
  /** Busy share of the last window, 0..1. */
  busy: number;
  /** False when `maxMs` passed first. */
  quiet: boolean;
}

export async function waitForQuiet(options: { busyBelow: number; windowMs: number; maxMs: number }): Promise<Quiet> {
  const start = performance.now();
  let busy = 1;
  while (performance.now() - start < options.maxMs) {
    const a = cpuTimes();
    await new Promise((r) => setTimeout(r, options.windowMs));
    const b = cpuTimes();
    busy = (b.busy - a.busy) / Math.max(1, b.total - a.total);
    if (busy < options.busyBelow) return { waitedMs: performance.now() - start, busy, quiet: true };
  }
  return { waitedMs: performance.now() - start, busy, quiet: false };
}
