/**
 * Nobody locks the others out: another agent's print(1) while one client floods the bridge with
 * silent sockets and waits, and the extension host's memory after the largest batches whose
 * answers grew with the square of the cells before (warnings naming every other cell).
 */
import * as net from 'node:net';
import * as path from 'node:path';
import { MAX_BATCH_OPS } from '../../src/core/cells/batch';
import { sleep } from '../../src/core/sleep';
import { HELD_LIMITS } from '../../src/server/heldRequests';
import { MAX_CONNECTIONS } from '../../src/server/listen';
import { firstSettled } from '../../sandbox-test/settled';
import { BenchClient } from './client';
import { restingRssMb, rssMb } from './machine';
import { writeNotebook } from './notebooks';
import { base, goal, p50, row } from './report';
import type { Ctx } from './sections';

const SILENT_SOCKETS = 300;
const RENEW_EVERY_MS = 20;
const PRINTS = 20;
const BATCHES = 7;
const IDLE_MS = 60_000;

/**
 * print(1)s of another agent on a notebook of their own, one after another, each on a connection
 * of its own (an agent that held one from before the flood would not meet it): each one's time
 * to `done`, connecting included.
 */
async function prints(ctx: Ctx, sid: string, fail: (why: string) => void): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < PRINTS; i++) {
    const agent = new BenchClient(ctx.url, ctx.token, 'bench-other-agent');
    const r = await agent.execute(sid, 'print(1)');
    await agent.close();
    if (r.error || r.stdout !== '1\n') fail(r.error ?? `stdout ${JSON.stringify(r.stdout)}`);
    times.push(r.ms);
  }
  return times;
}

/**
 * One client keeps SILENT_SOCKETS sockets that send nothing (one more every RENEW_EVERY_MS) and
 * MAX_CONNECTIONS waits on a running cell open; another agent's print(1), beside the same
 * print(1) before the flood.
 */
export async function flood(ctx: Ctx): Promise<void> {
  ctx.say(`flood: ${SILENT_SOCKETS} silent sockets and ${MAX_CONNECTIONS} waits from one client; another agent's print(1)`);
  const file = path.join(path.dirname(ctx.listFile), 'flood.ipynb');
  writeNotebook(file, 1, true);
  const target = await ctx.open(file, 'builtin');
  const control = new BenchClient(ctx.url, ctx.token);
  const cells = JSON.parse((await control.request('GET', `/notebooks/cells?notebook=${target.sid}`)).text) as {
    cells: { id: string }[];
  };
  const sleeper = cells.cells[0]!.id;
  await control.request('PATCH', `/notebooks/cells/${sleeper}`, {
    notebook: target.sid,
    code: 'import time\ntime.sleep(600)',
    force: true,
  });
  await control.request('POST', `/notebooks/cells/${sleeper}/run`, { notebook: target.sid });
  const failed: string[] = [];
  const quiet = await prints(ctx, ctx.notebooks.agents[0]!.sid, (why) => failed.push(why));

  const { hostname, port } = new URL(ctx.url);
  const sockets = new Set<net.Socket>();
  let closedByBridge = 0;
  const openSilent = () => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    socket.on('error', () => undefined);
    socket.resume();
    socket.on('close', () => sockets.delete(socket) && closedByBridge++);
    sockets.add(socket);
  };
  for (let i = 0; i < SILENT_SOCKETS; i++) openSilent();
  const renewing = setInterval(openSilent, RENEW_EVERY_MS);
  const flooder = Array.from({ length: MAX_CONNECTIONS }, () => new BenchClient(ctx.url, ctx.token, 'bench-flooder'));
  const waits = flooder.map((c) =>
    c.request('POST', `/notebooks/cells/${sleeper}/wait`, { notebook: target.sid, timeoutMs: 600_000 }, 600_000).then(
      (r) => r.status,
      () => 0,
    ),
  );
  // The client's share is held (which ones, the bridge decides); the rest are answered at once.
  const refused = await firstSettled(waits, MAX_CONNECTIONS - HELD_LIMITS.perClient, 120_000);
  const during = await prints(ctx, ctx.notebooks.agents[0]!.sid, (why) => failed.push(why));
  clearInterval(renewing);
  for (const socket of sockets) socket.destroy();
  await control.request('POST', '/notebooks/interrupt', { notebook: target.sid });
  await Promise.all([...flooder.map((c) => c.destroy()), control.close()]);
  const turnedAway = refused.filter((s) => s === 429).length;
  if (failed.length) ctx.problems.push(`flood: ${failed.length} print(1)s failed; the first: ${failed[0]!.slice(0, 200)}`);
  ctx.rows.push(
    row(
      'flood',
      `another agent's print(1) amid ${SILENT_SOCKETS} silent sockets and ${MAX_CONNECTIONS} waits, p50`,
      p50(during),
      'ms',
      {
        baseline: base('no flood', p50(quiet)),
        target: goal('every one answered 1', failed.length === 0),
        note: `max ${Math.max(...during).toFixed(0)} ms; ${turnedAway} of the ${MAX_CONNECTIONS - HELD_LIMITS.perClient} waits past the client's ${HELD_LIMITS.perClient} got 429; ${closedByBridge} silent sockets closed by the bridge`,
      },
    ),
  );
}

/**
 * BATCHES batches of MAX_BATCH_OPS creates of `y = <i>` into one notebook (every cell defines y:
 * each created cell's warning names the others), then the extension host's RSS once it has idled
 * for a minute, over its resting level before.
 */
export async function batchMemory(ctx: Ctx): Promise<void> {
  ctx.say(`memory: ${BATCHES} batches of ${MAX_BATCH_OPS} creates of y = <i>, then a minute idle`);
  const file = path.join(path.dirname(ctx.listFile), 'batch-memory.ipynb');
  writeNotebook(file, 1, true);
  const nb = await ctx.open(file);
  const client = new BenchClient(ctx.url, ctx.token);
  const rest = await restingRssMb(ctx.pid);
  const sizes: number[] = [];
  let peak = 0;
  for (let b = 0; b < BATCHES; b++) {
    const ops = Array.from({ length: MAX_BATCH_OPS }, (_, i) => ({ op: 'create', code: `y = ${b * MAX_BATCH_OPS + i}` }));
    const r = await client.request('POST', '/notebooks/edits', { notebook: nb.sid, ops }, 600_000);
    if (r.status !== 200) ctx.problems.push(`memory: batch ${b + 1}: ${r.status} ${r.text.slice(0, 200)}`);
    sizes.push(Buffer.byteLength(r.text) / 1024 / 1024);
    peak = Math.max(peak, rssMb(ctx.pid) - rest);
  }
  await client.close();
  const after = rssMb(ctx.pid) - rest;
  await sleep(IDLE_MS);
  const idle = rssMb(ctx.pid) - rest;
  ctx.rows.push(
    row('memory', `ext host RSS a minute after ${BATCHES} batches of ${MAX_BATCH_OPS} creates`, idle, 'MB', {
      target: goal('≤ +150 MB', idle <= 150),
      note: `over ${rest.toFixed(0)} MB resting; +${after.toFixed(0)} MB right after, peak +${peak.toFixed(0)} MB; answers ${sizes.map((s) => s.toFixed(1)).join(', ')} MB; the ${BATCHES * MAX_BATCH_OPS + 1} cells stay open`,
    }),
  );
}
