/**
 * Samples a process's resident memory (VmRSS of /proc/<pid>/status) every `intervalMs` on a
 * worker thread, so a busy main thread (parsing 10 MB of events) does not skip samples.
 */
import * as fs from 'node:fs';
import { Worker } from 'node:worker_threads';

export interface RssPeak {
  /** kB at the first sample. */
  startKb: number;
  peakKb: number;
  /** kB at the last sample. */
  endKb: number;
  samples: number;
}

export function readRssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

const WORKER = `
const fs = require('node:fs');
const { parentPort, workerData } = require('node:worker_threads');
const file = '/proc/' + workerData.pid + '/status';
const read = () => { const m = /^VmRSS:\\s+(\\d+) kB/m.exec(fs.readFileSync(file, 'utf8')); return m ? Number(m[1]) : 0; };
let startKb = read(), peakKb = startKb, endKb = startKb, samples = 1;
const timer = setInterval(() => { try { endKb = read(); samples++; if (endKb > peakKb) peakKb = endKb; } catch {} }, workerData.intervalMs);
parentPort.on('message', () => { clearInterval(timer); parentPort.postMessage({ startKb, peakKb, endKb, samples }); });
parentPort.postMessage('started');
`;

/** Starts sampling; the returned function stops and reports. */
export async function sampleRss(pid: number, intervalMs = 20): Promise<() => Promise<RssPeak>> {
  const worker = new Worker(WORKER, { eval: true, workerData: { pid, intervalMs } });
  await new Promise<void>((resolve, reject) => {
    worker.once('message', () => resolve());
    worker.once('error', reject);
  });
  return () =>
    new Promise<RssPeak>((resolve, reject) => {
      worker.once('message', (peak: RssPeak) => {
        void worker.terminate();
        resolve(peak);
      });
      worker.once('error', reject);
      worker.postMessage('stop');
    });
}

/** Median of a few quick samples: the resting level before a measurement. */
export async function restingRssKb(pid: number, samples = 5, gapMs = 20): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < samples; i++) {
    values.push(readRssKb(pid));
    await new Promise((r) => setTimeout(r, gapMs));
  }
  return values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}
