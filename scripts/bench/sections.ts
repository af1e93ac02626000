/**
 * The benchmark's measurements. Each takes the running sandbox's bridge (`Ctx`), times one thing
 * next to its baseline in the same run, interleaved run by run where both are quick, and adds
 * rows. A figure that needs a feature this build lacks becomes an "n/a: why" row.
 */
import { spawn } from 'node:child_process';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { MAX_BATCH_OPS } from '../../src/core/cells/batch';
import { STEP_CELLS } from '../../src/core/cells/changeSteps';
import type { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { BenchClient, type ExecResult } from './client';
import { executeCodeSh } from './peerTargets';
import { cpuMs, restingRssMb, rssMb, waitForQuiet } from './machine';
import { writeNotebook } from './notebooks';
import { base, goal, p50, percentile, row, type Row } from './report';
import { sleep } from '../../src/core/sleep';
import { randomHex } from '../../src/core/ids';

export interface Opened {
  path: string;
  sid: string;
}

export interface Ctx {
  url: string;
  token: string | null;
  /** The extension host's pid. */
  pid: number;
  floorUrl: string;
  /** Express + express.json + a Router with bare handlers, before the same kernel (scripts/bench/floor.ts). */
  expressFloorUrl: string;
  /** The floors' process (both serve from it). */
  floorPid: number;
  /** KernelProcesses driven from the bench: the kernel alone, without Python's IPython and with it. */
  kernels: { plain: KernelProcess; ipython: KernelProcess };
  notebooks: { agents: Opened[]; ipython: Opened; cells: Opened; runall: Opened; stall: Opened };
  /** Opens a notebook through the bridge, without selecting a kernel unless one is named (then started and warm). */
  open(file: string, kernel?: 'builtin'): Promise<Opened>;
  listFile: string;
  /** The sandbox's workbench, to act as the person, and its id (its processes' records). */
  page: Page;
  sandboxId: string;
  /** The Python of the builtin kernel's plain mode. */
  plainPython: string;
  /** Where the extension writes each edit's spans (AGENT_BRIDGE_EDIT_SPANS). */
  spansFile: string;
  /**
   * Notebooks to run on a Jupyter kernel (3 cells; 100 trivial ones for Run All), and how the
   * person starts one and grants the bridge access to it; or why there is none.
   */
  jupyter: { file: string; runAllFile: string; pick(): Promise<void>; allow(): Promise<void> } | { missing: string };
  rows: Row[];
  problems: string[];
  say(message: string): void;
}

const WARMUP = 20;
const RUNS = 300;
const CELL_RUNS = 40;
/** Runs in a row whose CPU time is read (/proc counts in 10 ms ticks). */
const CPU_RUNS = 1_000;
const AGENTS = 8;
const AGENT_RUNS = 50;
const STALL_MS = 10_000;
/** The stalled-reader run is cut short past this much extra memory: enough to show a leak, not to hurt the machine. */
const STALL_CAP_MB = 1_000;
const STALL_CODE = "while True:\n    print('x' * 99)";
/** Issue 16's run-many route: every cell of a notebook, waiting for the results. */
const RUN_ALL = { path: '/notebooks/run', body: (notebook: string) => ({ notebook, all: true, wait: true }) };

/** Runs each step `warmup + runs` times, rotating which goes first, so load from elsewhere hits all alike. */
async function interleave<K extends string>(
  runs: number,
  steps: Record<K, () => Promise<number>>,
  warmup = WARMUP,
): Promise<Record<K, number[]>> {
  const names = Object.keys(steps) as K[];
  const out = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  for (let i = 0; i < warmup + runs; i++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(i + k) % names.length]!;
      const ms = await steps[name]();
      if (i >= warmup) out[name].push(ms);
    }
  }
  return out;
}

/** Counts a step's failures in one line of the problems, with the first one's detail. */
function failures(ctx: Ctx, what: string): (detail: string) => void {
  let n = 0;
  let at = -1;
  let first = '';
  return (detail) => {
    if (at < 0) [at, first] = [ctx.problems.push('') - 1, detail.slice(0, 300)];
    ctx.problems[at] = `${what}: ${++n} failed; the first: ${first}`;
  };
}

/** An execute that must print `expect` and succeed; resolves with its time to `done`. */
function printing(ctx: Ctx, what: string, client: BenchClient, sid: string, code = 'print(1)', expect = '1\n') {
  const fail = failures(ctx, what);
  return async () => {
    const r = await client.execute(sid, code);
    if (r.error || r.stdout !== expect || r.done?.success !== true) fail(describe(r));
    return r.ms;
  };
}

const describe = (r: ExecResult) =>
  r.error ??
  `stdout ${JSON.stringify(r.stdout.slice(0, 100))} stderr ${JSON.stringify(r.stderr.slice(0, 200))} done ${JSON.stringify(r.done)}`;

/** One scratchpad run on a KernelProcess driven from here: the kernel alone. */
async function direct(kernel: KernelProcess, code: string): Promise<{ ms: number; stdout: string; ok: boolean }> {
  const start = performance.now();
  let stdout = '';
  const r = await kernel.run(code, 'scratchpad', (o) => {
    if (o.kind === 'stream' && o.name === 'stdout') stdout += o.text;
  });
  return { ms: performance.now() - start, stdout, ok: r.success };
}

function kernelAlone(ctx: Ctx, what: string, kernel: KernelProcess) {
  const fail = failures(ctx, what);
  return async () => {
    const r = await direct(kernel, 'print(1)');
    if (!r.ok || r.stdout !== '1\n') fail(JSON.stringify(r));
    return r.ms;
  };
}

/**
 * print(1) through the bridge, through the two floors (bare node:http, and Express with
 * express.json and a Router, before the same kernel) and on the kernel alone; GET /health on the
 * bridge and on the floors. The target is on the bridge's own code: bridge − Express floor.
 */
export async function scratchpad(ctx: Ctx): Promise<void> {
  ctx.say(`scratchpad and framework cost: ${WARMUP} + ${RUNS} runs each of 7 steps, interleaved`);
  const bridge = new BenchClient(ctx.url, ctx.token);
  const floor = new BenchClient(ctx.floorUrl, null);
  const expressFloor = new BenchClient(ctx.expressFloorUrl, null);
  const health = (client: BenchClient) => async () => {
    const r = await client.request('GET', '/health');
    if (r.status !== 200) ctx.problems.push(`/health: ${r.status}`);
    return r.ms;
  };
  const t = await interleave(RUNS, {
    health: health(bridge),
    floorHealth: health(floor),
    exec: printing(ctx, 'scratchpad print(1)', bridge, ctx.notebooks.agents[0]!.sid),
    floorExec: printing(ctx, 'floor print(1)', floor, 'floor'),
    expressHealth: health(expressFloor),
    expressExec: printing(ctx, 'Express floor print(1)', expressFloor, 'floor'),
    kernel: kernelAlone(ctx, 'kernel alone print(1)', ctx.kernels.plain),
  });
  // CPU per run in the serving process: the extension host (everything of ours in it) against the
  // Express floor's process (its framework, its kernel driver), each for CPU_RUNS runs in a row.
  const [bridgeCpu, floorCpu] = [
    await cpuPerRun(ctx.pid, CPU_RUNS, printing(ctx, 'scratchpad print(1)', bridge, ctx.notebooks.agents[0]!.sid)),
    await cpuPerRun(ctx.floorPid, CPU_RUNS, printing(ctx, 'Express floor print(1)', expressFloor, 'floor')),
  ];
  await Promise.all([bridge.close(), floor.close(), expressFloor.close()]);
  const [exec, kernel] = [p50(t.exec), p50(t.kernel)];
  // Both sides of a pair ran in the same round: the median of their differences shrugs off load that comes and goes.
  const paired = (a: number[], b: number[]) => p50(a.map((x, i) => x - b[i]!));
  const costs = { '/health': paired(t.health, t.expressHealth), execute: paired(t.exec, t.expressExec) };
  const framework = { '/health': paired(t.expressHealth, t.floorHealth), execute: paired(t.expressExec, t.floorExec) };
  ctx.rows.push(
    row('scratchpad', 'print(1) over HTTP, p50', exec, 'ms', {
      baseline: base('kernel alone', kernel),
      target: goal('< 5 ms', exec < 5),
    }),
    row('scratchpad', 'print(1) over HTTP, p95', percentile(t.exec, 95), 'ms', {
      baseline: base('kernel alone', percentile(t.kernel, 95)),
    }),
    row('framework', 'GET /health, p50', p50(t.health), 'ms', { baseline: base('node:http floor', p50(t.floorHealth)) }),
    row('framework', 'execute print(1), p50', exec, 'ms', { baseline: base('node:http floor + same kernel', p50(t.floorExec)) }),
    row('framework', 'execute print(1) on the Express floor, p50', p50(t.expressExec), 'ms', {
      baseline: base('node:http floor + same kernel', p50(t.floorExec)),
    }),
    ...Object.entries(framework).map(([on, cost]) =>
      row('framework', `Express floor − node:http floor on ${on} (p50 of pairs)`, cost, 'ms'),
    ),
    ...Object.entries(costs).map(([on, cost]) =>
      row('framework', `our own cost on ${on} (bridge − Express floor, p50 of pairs)`, cost, 'ms', {
        target: goal('≤ 0.1 ms', cost <= 0.1),
      }),
    ),
    row('framework', `CPU per execute print(1) in the extension host, ${CPU_RUNS} in a row`, bridgeCpu, 'ms', {
      baseline: base('Express floor process', floorCpu),
      note: `difference ${(bridgeCpu - floorCpu).toFixed(3)} ms; /proc's CPU times, 10 ms ticks, less the process's idle rate`,
    }),
  );
}

const BIG_PRINT_RUNS = 3;

/**
 * marimo-pair's execute-code.sh printing 15 MB (its answer capped, the whole at a URL), beside
 * raw curl sending the same request: what the script adds on top of the run and the transfer.
 */
export async function bigPrint(ctx: Ctx): Promise<void> {
  const figure = 'execute-code.sh printing 15 MB, p50';
  const scripts = process.env['MARIMO_PAIR_SCRIPTS'];
  if (!scripts) return void ctx.rows.push(row('scratchpad', figure, NaN, 'ms', { na: 'MARIMO_PAIR_SCRIPTS is not set' }));
  ctx.say(`big print: execute-code.sh and raw curl, ${BIG_PRINT_RUNS} runs each, printing 15 MB`);
  const nb = ctx.notebooks.agents[0]!;
  const code = 'for i in range(150_000):\n    print(f"{i:08d} " + "x" * 91)';
  const script = executeCodeSh(path.resolve(scripts), ctx.url, ctx.token, nb.path);
  const curl = () =>
    new Promise<number>((resolve) => {
      const start = performance.now();
      const auth = ctx.token ? ['-H', `Authorization: Bearer ${ctx.token}`] : [];
      const args = ['-sN', '-X', 'POST', `${ctx.url}/api/kernel/execute`, '-H', 'Content-Type: application/json'];
      const child = spawn('curl', [
        ...args,
        '-H',
        `Marimo-Session-Id: ${nb.sid}`,
        ...auth,
        '-d',
        JSON.stringify({ code }),
        '-o',
        '/dev/null',
      ]);
      child.on('close', (status) => resolve(status === 0 ? performance.now() - start : NaN));
    });
  const t = await interleave(
    BIG_PRINT_RUNS,
    {
      script: async () => {
        const r = await script(code);
        if (!r.ok) ctx.problems.push(`execute-code.sh printing 15 MB: ${r.out.slice(-300)}`);
        return r.ms;
      },
      curl,
    },
    1,
  );
  const [ours, raw] = [p50(t.script), p50(t.curl)];
  ctx.rows.push(
    row('scratchpad', figure, ours, 'ms', {
      baseline: base('raw curl, the same request', raw),
      target: goal('≤ 2× curl', ours <= 2 * raw),
      note: 'the answer carries head and tail; the script reads it and prints it',
    }),
  );
}

/**
 * CPU ms that process `pid` spends per run of `step`, beyond what it spends idle over as long
 * (measured for a second just before). CPU time swings far less than wall time on a busy machine.
 */
export async function cpuPerRun(pid: number, runs: number, step: () => Promise<number>): Promise<number> {
  const idleFrom = cpuMs(pid);
  await sleep(1_000);
  const idlePerMs = (cpuMs(pid) - idleFrom) / 1_000;
  const before = cpuMs(pid);
  const start = performance.now();
  for (let i = 0; i < runs; i++) await step();
  return (cpuMs(pid) - before - idlePerMs * (performance.now() - start)) / runs;
}

/** print(1) on the builtin kernel in plain-Python mode and in IPython mode, side by side. */
export async function kernelModes(ctx: Ctx): Promise<void> {
  const bridge = new BenchClient(ctx.url, ctx.token);
  // Which Python runs the kernel, and has it loaded IPython?
  const probe = "import sys\nprint('IPython' in sys.modules, sys.executable)";
  const viaBridge = (await bridge.execute(ctx.notebooks.ipython.sid, probe)).stdout.trim() || 'no answer';
  const alone = (await direct(ctx.kernels.ipython, probe)).stdout.trim() || 'no answer';
  const plain = (await direct(ctx.kernels.plain, probe)).stdout.trim();
  const [section, figure] = ['kernel modes', 'print(1) in IPython mode'];
  if (!viaBridge.startsWith('True') || !alone.startsWith('True') || !plain.startsWith('False')) {
    const why = !plain.startsWith('False')
      ? `the plain-mode kernel has IPython loaded (${plain})`
      : `no IPython in the kernel on Debian’s python3 (bridge: ${viaBridge}; alone: ${alone}): this build has no IPython path yet (issue 15), or python3-ipython is missing`;
    ctx.rows.push(row(section, `${figure}, p50`, NaN, 'ms', { na: why }));
    return bridge.close();
  }
  ctx.say(`kernel modes: ${WARMUP} + ${RUNS} runs each of 4 steps, interleaved`);
  const t = await interleave(RUNS, {
    plain: printing(ctx, 'plain-mode print(1)', bridge, ctx.notebooks.agents[0]!.sid),
    ipython: printing(ctx, 'IPython-mode print(1)', bridge, ctx.notebooks.ipython.sid),
    plainAlone: kernelAlone(ctx, 'plain kernel alone', ctx.kernels.plain),
    ipythonAlone: kernelAlone(ctx, 'IPython kernel alone', ctx.kernels.ipython),
  });
  await bridge.close();
  const ipython = p50(t.ipython);
  ctx.rows.push(
    row(section, `${figure} over HTTP, p50`, ipython, 'ms', {
      baseline: base('plain mode', p50(t.plain)),
      target: goal('< 2 ms', ipython < 2),
    }),
    row(section, `${figure}, kernel alone, p50`, p50(t.ipythonAlone), 'ms', { baseline: base('plain mode', p50(t.plainAlone)) }),
  );
}

/** Run-and-wait of one trivial cell, and run-all over 100 trivial cells. */
export async function cellRuns(ctx: Ctx): Promise<void> {
  ctx.say(`cell runs: ${CELL_RUNS} run-and-waits of a trivial cell, then 100 cells one by one and through run-all`);
  const bridge = new BenchClient(ctx.url, ctx.token);
  const sid = ctx.notebooks.cells.sid;
  const listed = await bridge.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(sid)}`);
  const ids = (JSON.parse(listed.text) as { cells: { id: string }[] }).cells.map((c) => c.id);
  const fail = failures(ctx, 'cell run-and-wait');
  const runCell = async (id: string) => {
    const r = await bridge.request('POST', `/notebooks/cells/${encodeURIComponent(id)}/run`, { notebook: sid, wait: true });
    if (r.status !== 200 || (JSON.parse(r.text) as { success?: boolean }).success !== true) fail(`${r.status} ${r.text}`);
    return r.ms;
  };
  const scratch = printing(ctx, 'scratchpad x = 1', bridge, sid, 'x = 1', '');
  const t = await interleave(CELL_RUNS, { cell: () => runCell(ids[0]!), scratch }, 3);
  const [section, cell] = ['cell runs', p50(t.cell)];
  const baseline = base('scratchpad, same code', p50(t.scratch));
  ctx.rows.push(
    row(section, 'run-and-wait of a trivial cell, p50', cell, 'ms', { baseline, target: goal('≤ 15 ms', cell <= 15) }),
  );
  let start = performance.now();
  for (const id of ids) await runCell(id);
  const oneByOne = performance.now() - start;
  start = performance.now();
  const all = await bridge.request('POST', RUN_ALL.path, RUN_ALL.body(sid), 120_000);
  const allMs = performance.now() - start;
  if (all.status === 200 && (JSON.parse(all.text) as { status?: string }).status !== 'succeeded')
    ctx.problems.push(`run-all: ${all.text.slice(0, 300)}`);
  await bridge.close();
  const figure = `run-all over ${ids.length} trivial cells`;
  const na = `POST ${RUN_ALL.path} answered ${all.status} ${all.text.slice(0, 120)} (no run-many route in this build: issue 16); ${ids.length} run-and-waits one by one took ${oneByOne.toFixed(0)} ms`;
  ctx.rows.push(
    all.status === 200
      ? row(section, figure, allMs, 'ms', { baseline: base('one request per cell', oneByOne) })
      : row(section, figure, NaN, 'ms', { na }),
  );
}

/**
 * 10 s of `while True: print(...)` to a client that sends the request and never reads: the
 * extension host's peak extra memory, then the notebook's next print(1) after the client left.
 */
export async function stalledReader(ctx: Ctx): Promise<void> {
  ctx.say(`stalled reader: ${STALL_MS / 1000} s of printing to a client that does not read (cut at +${STALL_CAP_MB} MB)`);
  const sid = ctx.notebooks.stall.sid;
  const rest = await restingRssMb(ctx.pid);
  const { hostname, port } = new URL(ctx.url);
  const body = JSON.stringify({ code: STALL_CODE });
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.pause(); // never read: what the bridge sends piles up in the socket buffers, then in the bridge
  socket.on('error', () => undefined);
  socket.write(
    `POST /api/kernel/execute HTTP/1.1\r\nHost: ${hostname}:${port}\r\n${ctx.token ? `Authorization: Bearer ${ctx.token}\r\n` : ''}` +
      `Marimo-Session-Id: ${sid}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  const start = performance.now();
  let peak = 0;
  while (performance.now() - start < STALL_MS && peak < STALL_CAP_MB) {
    await sleep(100);
    peak = Math.max(peak, rssMb(ctx.pid) - rest);
  }
  const heldMs = performance.now() - start;
  socket.destroy();
  const gone = performance.now();
  const bridge = new BenchClient(ctx.url, ctx.token);
  let recovered = false;
  while (!recovered && performance.now() - gone < 20_000) {
    const r = await bridge.execute(sid, 'print(1)', 10_000);
    recovered = r.stdout === '1\n' && r.done?.success === true;
    if (!recovered) await sleep(200);
  }
  const recoveryMs = performance.now() - gone;
  if (!recovered) await bridge.request('POST', '/notebooks/restart', { notebook: sid });
  await bridge.close();
  const after = rssMb(ctx.pid) - rest;
  const cut = peak >= STALL_CAP_MB ? `; cut after ${(heldMs / 1000).toFixed(1)} s at the cap` : '';
  const note = `resting ${rest.toFixed(0)} MB, +${((peak / heldMs) * 1000).toFixed(0)} MB/s${cut}; +${after.toFixed(0)} MB once the client left and print(1) ran again`;
  const [section, figure] = ['stalled reader', 'client gone → the next print(1) done'];
  ctx.rows.push(
    row(section, 'ext host peak extra RSS, 10 s to a client that does not read', peak, 'MB', {
      target: goal('≤ 50 MB', peak <= 50),
      note,
    }),
    recovered
      ? row(section, figure, recoveryMs, 'ms', { target: goal('≤ 5 s', recoveryMs <= 5000) })
      : row(section, figure, NaN, 'ms', { na: 'not within 20 s after the client left; the kernel was restarted' }),
  );
}

/** 8 agents on 8 notebooks at once, each run printing its own token; vs. 1 agent alone. */
export async function agents(ctx: Ctx): Promise<void> {
  ctx.say(`agents: 1 agent × ${AGENT_RUNS} runs, then ${AGENTS} agents × ${AGENT_RUNS} runs at once`);
  const salt = randomHex(3);
  let failed = 0;
  let crossTalk = 0;
  const fail = failures(ctx, 'agent run');
  const agent = async (k: number, nb: Opened) => {
    const client = new BenchClient(ctx.url, ctx.token);
    for (let i = 0; i < AGENT_RUNS; i++) {
      const token = `tok-a${k}-r${i}-${salt}`;
      const r = await client.execute(nb.sid, `print(${JSON.stringify(token)})`);
      if ((r.raw.match(/tok-a\d+-r\d+-[0-9a-f]{6}/g) ?? []).some((t) => t !== token)) crossTalk++;
      if (r.error || r.stdout !== `${token}\n` || r.done?.success !== true) {
        failed++;
        fail(describe(r));
      }
    }
    await client.close();
  };
  let start = performance.now();
  await agent(99, ctx.notebooks.agents[0]!);
  const single = AGENT_RUNS / ((performance.now() - start) / 1000);
  start = performance.now();
  await Promise.all(ctx.notebooks.agents.slice(0, AGENTS).map((nb, k) => agent(k, nb)));
  const many = (AGENTS * AGENT_RUNS) / ((performance.now() - start) / 1000);
  ctx.rows.push(
    row('agents', `${AGENTS} agents × ${AGENT_RUNS} runs: throughput`, many, 'runs/s', { baseline: base('1 agent', single) }),
    row('agents', 'failed runs', failed, 'count', { target: goal('0', failed === 0) }),
    row('agents', 'runs that saw another run’s output', crossTalk, 'count', { target: goal('0', crossTalk === 0) }),
  );
}

/**
 * The largest batch a client may send (MAX_BATCH_OPS creates in one POST /notebooks/edits) while
 * another client probes /health: the extension host, shared by every extension in the window,
 * must keep answering (the batch is applied in steps of STEP_CELLS cells). Probes on the quiet
 * host before it are the baseline; the load average when it began is printed beside it.
 */
export async function largestBatch(ctx: Ctx): Promise<void> {
  ctx.say(`batch: ${MAX_BATCH_OPS} creates in one batch while /health is probed every ${PROBE_EVERY_MS} ms`);
  const file = path.join(path.dirname(ctx.listFile), 'batch.ipynb');
  writeNotebook(file, 1, true);
  const nb = await ctx.open(file);
  const bridge = new BenchClient(ctx.url, ctx.token);
  const settled = await waitForQuiet(0.1, 30_000);
  if (!settled.quiet) ctx.problems.push(`batch: the machine was ${(settled.busy * 100).toFixed(0)}% busy when it began`);
  let waiting = true;
  const quietProbes = probeHealth(ctx, () => waiting);
  await sleep(1_000);
  waiting = false;
  const quiet = await quietProbes;
  const ops = Array.from({ length: MAX_BATCH_OPS }, (_, i) => ({ op: 'create', code: `cell_${i} = ${i}` }));
  let applying = true;
  const probes = probeHealth(ctx, () => applying);
  const load = os.loadavg();
  const r = await bridge.request('POST', '/notebooks/edits', { notebook: nb.sid, ops }, 300_000);
  applying = false;
  const during = await probes;
  const over = await bridge.request('POST', '/notebooks/edits', { notebook: nb.sid, ops: [...ops, ops[0]] }, 60_000);
  await bridge.close();
  if (r.status !== 200) ctx.problems.push(`batch of ${MAX_BATCH_OPS}: ${r.status} ${r.text.slice(0, 200)}`);
  if (over.status !== 413) ctx.problems.push(`batch of ${MAX_BATCH_OPS + 1}: ${over.status}, not 413`);
  const p99 = percentile(during, 99);
  const loadNote = `load average ${load.map((l) => l.toFixed(2)).join(' ')} when it began (${os.cpus().length} CPUs)`;
  const slow = during.filter((ms) => ms >= 100).length;
  ctx.rows.push(
    row('batch', `POST /notebooks/edits, ${MAX_BATCH_OPS} creates (the cap)`, r.ms, 'ms', {
      note: `applied in steps of at most ${STEP_CELLS} cells; ${loadNote}`,
    }),
    row('batch', '/health p50 while it applies', percentile(during, 50), 'ms', {
      baseline: base('quiet host', percentile(quiet, 50)),
    }),
    row('batch', '/health p99 while it applies', p99, 'ms', {
      baseline: base('quiet host', percentile(quiet, 99)),
      target: goal('< 100 ms', p99 < 100),
      note: `${during.length} probes, ${slow} of them ≥ 100 ms, max ${Math.max(...during).toFixed(0)} ms; ${loadNote}`,
    }),
  );
}

const PROBE_EVERY_MS = 10;

/**
 * GET /health due every PROBE_EVERY_MS while `going()`, each timed from when it was due (open
 * loop, over a few connections): a stall of the host counts against every probe due during it,
 * not only against the one in flight, as one probe after another would.
 */
export async function probeHealth(ctx: Ctx, going: () => boolean): Promise<number[]> {
  const free = Array.from({ length: 8 }, () => new BenchClient(ctx.url, ctx.token));
  const all = [...free];
  const waiters: ((c: BenchClient) => void)[] = [];
  const take = () => free.pop() ?? new Promise<BenchClient>((r) => waiters.push(r));
  const give = (c: BenchClient) => (waiters.length ? waiters.shift()!(c) : free.push(c));
  const times: Promise<number>[] = [];
  const start = performance.now();
  for (let k = 0; going(); k++) {
    const due = start + k * PROBE_EVERY_MS;
    await sleep(Math.max(0, due - performance.now()));
    times.push(
      (async () => {
        const client = await take();
        await client.request('GET', '/health', undefined, 60_000);
        give(client);
        return performance.now() - due;
      })(),
    );
  }
  const out = await Promise.all(times);
  await Promise.all(all.map((c) => c.close()));
  return out;
}

/** Listing a 1,000-cell notebook vs. the 100-cell one; opened last, as VS Code lays it out for tens of seconds. */
export async function listing(ctx: Ctx): Promise<void> {
  const start = performance.now();
  const big = await ctx.open(ctx.listFile);
  ctx.say(
    `listing: opened the 1,000-cell notebook in ${(performance.now() - start).toFixed(0)} ms; 20 listings each of it and of 100 cells`,
  );
  const bridge = new BenchClient(ctx.url, ctx.token);
  let bytes = 0;
  const list = (sid: string, cells: number) => async () => {
    const r = await bridge.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(sid)}`);
    const n = r.status === 200 ? (JSON.parse(r.text) as { cells: unknown[] }).cells.length : -1;
    if (n !== cells) ctx.problems.push(`listing ${cells} cells: ${r.status}, ${n} cells`);
    if (cells === 1000) bytes = Buffer.byteLength(r.text);
    return r.ms;
  };
  const t = await interleave(20, { big: list(big.sid, 1000), small: list(ctx.notebooks.cells.sid, 100) });
  await bridge.close();
  ctx.rows.push(
    row('listing', 'GET /notebooks/cells, 1,000 cells, p50', p50(t.big), 'ms', {
      baseline: base('100 cells', p50(t.small)),
      target: goal('< 50 ms', p50(t.big) < 50),
      note: `${bytes.toLocaleString('en-US')} B; timed while VS Code still lays the notebook out, as a person would meet it`,
    }),
  );
}

/** print(1) on a real Jupyter kernel (ipykernel through the Jupyter extension) beside the builtin kernel and the kernel alone. */
/**
 * Opens the notebook and starts its Jupyter kernel as the person would: picks the kernelspec in the
 * list Jupyter shows when the bridge starts a kernel, allows our use of its kernels when VS Code
 * asks (once), then runs `None` in it. Why not, when it cannot.
 */
export async function startJupyter(ctx: Ctx, file: string): Promise<Opened | { na: string }> {
  if ('missing' in ctx.jupyter) return { na: ctx.jupyter.missing };
  const bridge = new BenchClient(ctx.url, ctx.token);
  try {
    const allowed = ctx.jupyter.allow().then(
      () => '',
      (e: unknown) => ` (no consent dialog to allow: ${e instanceof Error ? e.message.split('\n')[0] : String(e)})`,
    );
    const opened = await ctx.open(file);
    const picked = ctx.jupyter.pick().catch(() => undefined);
    const started = await bridge.request('POST', '/notebooks/kernel/start', { notebook: opened.sid, kernel: 'jupyter' }, 180_000);
    await picked;
    const first = started.status === 200 ? await bridge.execute(opened.sid, 'None', 180_000) : undefined;
    if (first?.done?.success === true) return opened;
    const what = first ? `its first run: ${describe(first)}` : `POST /notebooks/kernel/start: ${started.status} ${started.text}`;
    return { na: `${what.slice(0, 250)}${await allowed}` };
  } finally {
    await bridge.close();
  }
}

export async function jupyterKernel(ctx: Ctx): Promise<void> {
  const figure = 'scratchpad print(1) on a Jupyter kernel, p50';
  if ('missing' in ctx.jupyter) return void ctx.rows.push(row('jupyter', figure, NaN, 'ms', { na: ctx.jupyter.missing }));
  const started = await startJupyter(ctx, ctx.jupyter.file);
  if ('na' in started) return void ctx.rows.push(row('jupyter', figure, NaN, 'ms', { na: started.na }));
  const bridge = new BenchClient(ctx.url, ctx.token);
  const sid = started.sid;
  ctx.say(`jupyter: ${WARMUP} + ${RUNS / 3} runs each on the Jupyter kernel, the builtin one and the kernel alone`);
  const t = await interleave(RUNS / 3, {
    jupyter: printing(ctx, 'Jupyter print(1)', bridge, sid),
    builtin: printing(ctx, 'builtin print(1)', bridge, ctx.notebooks.agents[0]!.sid),
    kernel: kernelAlone(ctx, 'kernel alone', ctx.kernels.plain),
  });
  // Run-and-wait of the first code cell of each notebook; the Jupyter one stays in front (a run
  // through VS Code's command needs its editor; builtin runs need none).
  const fail = failures(ctx, 'run-and-wait');
  const runFirst = async (notebook: string) => {
    const listed = await bridge.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(notebook)}`);
    const cells = (JSON.parse(listed.text) as { cells: { id: string; kind: string }[] }).cells;
    const id = encodeURIComponent(cells.find((c) => c.kind === 'code')!.id);
    return async () => {
      const r = await bridge.request('POST', `/notebooks/cells/${id}/run`, { notebook, wait: true });
      if (r.status !== 200 || (JSON.parse(r.text) as { success?: boolean }).success !== true) fail(`${r.status} ${r.text}`);
      return r.ms;
    };
  };
  const runs = { jupyter: await runFirst(sid), builtin: await runFirst(ctx.notebooks.agents[0]!.sid) };
  const waited = await interleave(CELL_RUNS, runs, 3);
  await bridge.close();
  const [jupyterRun, builtinRun] = [p50(waited.jupyter), p50(waited.builtin)];
  ctx.rows.push(
    row('jupyter', figure, p50(t.jupyter), 'ms', {
      baseline: base('builtin kernel', p50(t.builtin)),
      note: `the builtin kernel alone: ${p50(t.kernel).toFixed(3)} ms`,
    }),
    row('jupyter', 'run-and-wait of a cell on a Jupyter kernel, p50', jupyterRun, 'ms', {
      baseline: base('builtin kernel', builtinRun),
      target: goal('≤ 1.5× builtin', jupyterRun <= 1.5 * builtinRun),
      note: `p95 ${percentile(waited.jupyter, 95).toFixed(1)} ms against ${percentile(waited.builtin, 95).toFixed(1)} ms`,
    }),
  );
}
