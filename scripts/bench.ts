/**
 * `npm run bench [-- --no-build] [--vsix FILE] [--only 1,4] [--list-sizes 10,100,1000,5000] [--compare A.json [B.json]]`
 *
 * What the bridge costs, each figure next to a baseline measured in the same run: builds and
 * packages the extension (unless --no-build), generates notebooks in a temp workspace, starts the
 * harness's isolated VS Code (sandbox-test/vscode.ts) with the .vsix, finds the bridge through its
 * discovery file, opens the notebooks through it, waits until the machine is quiet (VS Code lays
 * out large notebooks for seconds after opening them), and measures
 *   1. the scratchpad round trip of print(1) over HTTP vs. a KernelProcess driven from here,
 *      with the bridge's server code in plain Node (scripts/bench/plainServer.ts) and a bare
 *      node:http server alongside to split the overhead (and through marimo-pair's
 *      execute-code.sh when MARIMO_PAIR_SCRIPTS is set),
 *   2. a cell edit (PATCH) vs. a cell read (GET),
 *   3. listing 10 / 100 / 1,000 / 5,000 cells: time and size (and the same in plain Node),
 *   4. 10 MB of stdout through SSE: wall time and the extension host's peak extra memory,
 *   5. 8 agents on 8 notebooks at once vs. 1 agent: throughput, failures, cross-talk,
 *   6. activation time and bundle size.
 * Prints a table, writes bench-results/<timestamp>.json, and with --compare prints the deltas
 * against an earlier file (with two files: just the deltas, nothing is run). Targets from the
 * issue are shown as met/MISSED; nothing fails on them (exit code 1 only when the run broke).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { Agent } from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { KernelProcess, type KernelRunResult } from '../src/kernels/builtin/kernelProcess';
import { BridgeClient } from '../sandbox-test/http';
import { launchSandbox, listRecords, ownerRunning, REPO_ROOT, type Sandbox } from '../sandbox-test/vscode';
import { type BareServer, type PlainServer, startBareServer, startFloorServer, startPlainServer } from './bench/baselines';
import { KeepAliveClient, nodeHttpGet, type ExecResult } from './bench/client';
import { writeNotebook } from './bench/notebooks';
import { readResults, renderCompare, renderTable, type Results, type Row, writeResults } from './bench/report';
import { waitForQuiet } from './bench/quiet';
import { restingRssKb, sampleRss } from './bench/rss';
import { median, round, roundSummary, summarize, type Summary } from './bench/stats';

const DEFAULT_VSIX = path.join(REPO_ROOT, 'dist', 'agent-bridge.vsix');
const RESULTS_DIR = path.join(REPO_ROOT, 'bench-results');

const SCRATCH_WARMUP = 20;
const SCRATCH_RUNS = 200;
const SCRIPT_RUNS = 20;
const EDIT_RUNS = 60;
const DEFAULT_LIST_SIZES = [10, 100, 1000, 5000];
/** Cell counts of the listed notebooks (`--list-sizes`); the first is the per-cell baseline. */
let LIST_SIZES: readonly number[] = DEFAULT_LIST_SIZES;
const LIST_RUNS = 10;
const STREAM_BYTES = 10_000_000;
const STREAM_RUNS = 2;
const AGENTS = 8;
const AGENT_RUNS = 50;
/** Share of all cores busy below which the machine counts as quiet before timing starts. */
const QUIET_BUSY = 0.1;
const STREAM_CODE = `import sys\nline = 'x' * 99 + '\\n'\nfor i in range(${STREAM_BYTES / 100}):\n    sys.stdout.write(line)\n`;

// ------------------------------------------------------------------------------------ plumbing

interface Args {
  build: boolean;
  vsix: string;
  only: Set<number> | undefined;
  compare: string[];
  listSizes: number[];
}

const USAGE =
  'usage: tsx scripts/bench.ts [--no-build] [--vsix FILE] [--only 1,2,...] [--list-sizes 10,100,1000,5000] [--compare A.json [B.json]]';

function parseArgs(argv: string[]): Args {
  const args: Args = { build: true, vsix: DEFAULT_VSIX, only: undefined, compare: [], listSizes: DEFAULT_LIST_SIZES };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--no-build') args.build = false;
    else if (a === '--vsix') {
      args.vsix = path.resolve(argv[++i] ?? '');
      args.build = false;
    } else if (a === '--only') args.only = new Set((argv[++i] ?? '').split(',').map(Number));
    else if (a === '--list-sizes') {
      args.listSizes = (argv[++i] ?? '').split(',').map(Number);
      if (!args.listSizes.length || args.listSizes.some((n) => !Number.isInteger(n) || n < 1)) {
        throw new Error(`--list-sizes takes cell counts such as 10,100,1000\n${USAGE}`);
      }
    } else if (a === '--compare') {
      while (argv[i + 1] && !argv[i + 1]!.startsWith('--')) args.compare.push(path.resolve(argv[++i]!));
      if (!args.compare.length || args.compare.length > 2) throw new Error(`--compare takes one or two files\n${USAGE}`);
    } else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return args;
}

const t0 = Date.now();
const say = (msg: string) => process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const ms = (s: Summary, k: 'p50' | 'p95' | 'p99') => s[k];

function gitInfo(): { commit: string; dirty: boolean } {
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' });
  const status = spawnSync('git', ['status', '--porcelain'], { cwd: REPO_ROOT, encoding: 'utf8' });
  return { commit: head.stdout.trim() || 'unknown', dirty: status.stdout.trim() !== '' };
}

/** Other sandboxes whose owner is alive: they share the 2 cores with us, and skew the figures. */
function otherSandboxes(own?: string): string[] {
  return listRecords()
    .filter((r) => r.id !== own && ownerRunning(r))
    .map((r) => `${r.id} (${r.kind})`);
}

function row(r: Omit<Row, 'ratio'> & { ratio?: number }): Row {
  const ratio = r.ratio ?? (r.baseline && r.baseline.value !== 0 ? r.value / r.baseline.value : undefined);
  return {
    ...r,
    value: round(r.value),
    ...(r.baseline ? { baseline: { ...r.baseline, value: round(r.baseline.value) } } : {}),
    ...(ratio === undefined ? {} : { ratio: round(ratio) }),
  };
}

/** Runs `bash file args` (or any command) and resolves with its wall time. */
function timedSpawn(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - start, code, stdout, stderr });
    });
  });
}

// ------------------------------------------------------------------------------- the sandbox

interface Advert {
  url: string;
  port: number;
  pid: number;
  token: string | null;
  startedAt: string;
}

interface Opened {
  path: string;
  cells: number;
  sid: string;
  openMs: number;
}

interface Ctx {
  sandbox: Sandbox;
  advert: Advert;
  client: BridgeClient;
  workspace: string;
  lists: Map<number, Opened>;
  agents: Opened[];
  direct: KernelProcess;
  plain: PlainServer;
  floor: BareServer;
  bare: BareServer;
  rows: Row[];
  details: Record<string, unknown>;
  problems: string[];
}

/** Packages the extension as the harness does (its build() is private to sandbox-test/run.ts). */
function build(): void {
  say('npm run package');
  const r = spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) throw new Error(`npm run package failed (status ${r.status})`);
}

/**
 * Waits for the discovery file (polled every 10 ms, for the timing) and /health. The harness's
 * findBridge() does the same at 150 ms resolution but is private to sandbox-test/run.ts.
 */
async function findBridge(sandbox: Sandbox, file: string): Promise<{ advert: Advert; seenAt: number }> {
  const end = Date.now() + 60_000;
  let advert: Advert | undefined;
  while (!advert) {
    if (!sandbox.alive()) throw new Error(`VS Code went away before the bridge appeared\n${sandbox.logTail(20)}`);
    if (Date.now() > end) throw new Error(`no discovery file at ${file} after 60 s\n${sandbox.logTail(20)}`);
    try {
      const a = JSON.parse(fs.readFileSync(file, 'utf8')) as Advert;
      if (Number.isInteger(a.port) && a.port > 0) advert = a;
    } catch {
      await sleep(10);
    }
  }
  const seenAt = Date.now();
  const client = new BridgeClient(advert.url, advert.token);
  await sandbox.waitFor(
    `${advert.url}/health`,
    async () => (await client.get('/health', { timeoutMs: 2000 })).status === 200,
    15_000,
  );
  return { advert, seenAt };
}

/** One `None` run on a connection of its own, closed after: the session's kernel is up and warm. */
async function warm(advert: Advert, sid: string): Promise<void> {
  const client = new KeepAliveClient(advert.url, advert.token);
  await client.execute(sid, 'None');
  client.close();
}

async function open(client: BridgeClient, file: string, cells: number, kernel: boolean): Promise<Opened> {
  const start = performance.now();
  const r = await client.post(
    '/notebooks/open',
    { path: file, ...(kernel ? { kernel: 'builtin' } : {}) },
    { timeoutMs: 180_000 },
  );
  if (r.status !== 200) throw new Error(`POST /notebooks/open ${path.basename(file)}: ${r.status} ${r.text.slice(0, 300)}`);
  const sid = r.json<{ session: { id: string } }>().session.id;
  return { path: file, cells, sid, openMs: performance.now() - start };
}

/**
 * Waits for the machine to go quiet (VS Code laying out what was just opened) and records how
 * long that took; timings taken while it is busy measure VS Code's renderer, not the bridge.
 */
async function settle(details: Record<string, unknown>, before: string, maxMs: number): Promise<void> {
  const q = await waitForQuiet({ busyBelow: QUIET_BUSY, windowMs: 500, maxMs });
  const record = { waitedMs: Math.round(q.waitedMs), busy: round(q.busy, 3), quiet: q.quiet };
  const settled = (details['settled'] ??= {}) as Record<string, typeof record>;
  settled[before] = record;
  say(
    q.quiet
      ? `machine quiet (${(q.busy * 100).toFixed(0)}% busy) after ${(q.waitedMs / 1000).toFixed(1)} s, ${before}`
      : `machine still ${(q.busy * 100).toFixed(0)}% busy after ${(q.waitedMs / 1000).toFixed(0)} s, ${before}: timings will be noisy`,
  );
}

/** The kernel.py the extension host runs: the one inside the installed .vsix. */
function installedKernelScript(sandbox: Sandbox): string {
  const ext = fs.readdirSync(sandbox.dirs.extensions).find((n) => n.startsWith('agent-bridge.agent-bridge'));
  const script = ext && path.join(sandbox.dirs.extensions, ext, 'dist', 'kernel.py');
  if (script && fs.existsSync(script)) return script;
  return path.join(REPO_ROOT, 'dist', 'kernel.py');
}

/** One run on the in-process KernelProcess: total time and time to the first output. */
async function directRun(
  kp: KernelProcess,
  code: string,
  keep = true,
): Promise<{ ms: number; firstMs: number; stdout: string; chars: number; result: KernelRunResult }> {
  const start = performance.now();
  let firstMs = NaN;
  let stdout = '';
  let chars = 0;
  const result = await kp.run(code, 'scratchpad', (o) => {
    if (Number.isNaN(firstMs)) firstMs = performance.now() - start;
    if (o.kind === 'stream' && o.name === 'stdout') {
      chars += o.text.length;
      if (keep) stdout += o.text;
    }
  });
  return { ms: performance.now() - start, firstMs, stdout, chars, result };
}

// ---------------------------------------------------------------------------------- sections

/**
 * Runs each step `warmup + runs` times, rotating which goes first each round, so that load from
 * elsewhere and each step's after-effects hit all of them alike; `keep` is false while warming up.
 */
async function interleave(warmup: number, runs: number, steps: Record<string, (keep: boolean) => Promise<void>>): Promise<void> {
  const all = Object.values(steps);
  for (let i = 0; i < warmup + runs; i++) {
    for (let k = 0; k < all.length; k++) await all[(i + k) % all.length]!(i >= warmup);
  }
}

/**
 * 1. print(1) over keep-alive HTTP to the extension host, vs. a KernelProcess driven from here
 * over its pipe; the same server code in plain Node (no VS Code) and the floor server (node:http
 * and the kernel, nothing else) are run alongside, so the overhead splits into "any HTTP front",
 * "the bridge's code" and "being inside VS Code". Interleaved run by run, rotating the order, so
 * load from elsewhere hits all four alike.
 */
async function benchScratchpad(ctx: Ctx): Promise<void> {
  say(`1. scratchpad: ${SCRATCH_WARMUP} warm-up + ${SCRATCH_RUNS} runs each: extension host, plain Node, floor, KernelProcess`);
  const sid = ctx.agents[0]!.sid;
  const http = new KeepAliveClient(ctx.advert.url, ctx.advert.token);
  const plain = new KeepAliveClient(ctx.plain.url, ctx.plain.token);
  const floor = new KeepAliveClient(ctx.floor.url, null);
  const bare = new KeepAliveClient(ctx.bare.url, null);
  const viaHttp: ExecResult[] = [];
  const viaPlain: ExecResult[] = [];
  const viaFloor: ExecResult[] = [];
  const direct: { ms: number; firstMs: number }[] = [];
  let bad = 0;
  const printOne = (client: KeepAliveClient, session: string, into: ExecResult[]) => async (keep: boolean) => {
    const r = await client.execute(session, 'print(1)');
    if (r.status !== 200 || r.stdout !== '1\n' || r.done?.success !== true || r.error) bad++;
    if (keep) into.push(r);
  };
  const steps: Record<string, (keep: boolean) => Promise<void>> = {
    http: printOne(http, sid, viaHttp),
    plain: printOne(plain, ctx.plain.session, viaPlain),
    floor: printOne(floor, 'any', viaFloor),
    direct: async (keep) => {
      const r = await directRun(ctx.direct, 'print(1)');
      if (r.stdout !== '1\n' || !r.result.success) bad++;
      if (keep) direct.push(r);
    },
  };
  await interleave(SCRATCH_WARMUP, SCRATCH_RUNS, steps);
  const health: number[] = [];
  const bareHealth: number[] = [];
  const nodeClient: number[] = [];
  const nodeAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  const timed = (into: number[], call: () => Promise<number>) => async (keep: boolean) => {
    const ms = await call();
    if (keep) into.push(ms);
  };
  await interleave(SCRATCH_WARMUP, SCRATCH_RUNS, {
    bridge: timed(health, async () => (await http.request('GET', '/health')).ms),
    bare: timed(bareHealth, async () => (await bare.request('GET', '/health')).ms),
    nodeClient: timed(nodeClient, () => nodeHttpGet(nodeAgent, `${ctx.bare.url}/health`)),
  });
  http.close();
  plain.close();
  floor.close();
  bare.close();
  nodeAgent.destroy();
  if (bad) ctx.problems.push(`scratchpad: ${bad} runs gave the wrong output`);
  const h = summarize(viaHttp.map((r) => r.doneMs));
  const p = summarize(viaPlain.map((r) => r.doneMs));
  const f = summarize(viaFloor.map((r) => r.doneMs));
  const d = summarize(direct.map((r) => r.ms));
  const firstHttp = summarize(viaHttp.map((r) => r.firstEventMs));
  const firstDirect = summarize(direct.map((r) => r.firstMs));
  const hs = summarize(health);
  const bs = summarize(bareHealth);
  const ns = summarize(nodeClient);
  const S = '1 scratchpad';
  for (const k of ['p50', 'p95', 'p99'] as const) {
    ctx.rows.push(
      row({
        id: `scratchpad.http.${k}`,
        section: S,
        figure: `print(1) over HTTP, ${k}`,
        value: ms(h, k),
        unit: 'ms',
        better: 'lower',
        baseline: { label: 'KernelProcess', value: ms(d, k) },
        ...(k === 'p50' ? { target: { text: '< 5 ms', met: h.p50 < 5 } } : {}),
      }),
    );
  }
  ctx.rows.push(
    row({
      id: 'scratchpad.overhead.p50',
      section: S,
      figure: 'bridge overhead (p50 HTTP − p50 kernel)',
      value: h.p50 - d.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'floor server', value: f.p50 - d.p50 },
      target: { text: '≤ 1 ms', met: h.p50 - d.p50 <= 1 },
      note: 'the baseline is the floor server’s overhead: node:http and the same kernel with nothing else (scripts/bench/floorServer.ts), what any HTTP front costs here',
    }),
    row({
      id: 'scratchpad.plain.p50',
      section: S,
      figure: 'print(1), same server code in plain Node, p50',
      value: p.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'KernelProcess', value: d.p50 },
      note: 'src/server app + routes + BuiltinScratchpad in a Node process without VS Code (scripts/bench/plainServer.ts): what the bridge’s own code costs',
    }),
    row({
      id: 'scratchpad.first.p50',
      section: S,
      figure: 'request → first stdout event, p50',
      value: firstHttp.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'KernelProcess', value: firstDirect.p50 },
    }),
    row({
      id: 'scratchpad.health.p50',
      section: S,
      figure: 'GET /health (keep-alive), p50',
      value: hs.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'bare node:http server', value: bs.p50 },
      note: 'the floor of any request: the ratio is what the bridge’s request path (checks, router) costs per request',
    }),
    row({
      id: 'scratchpad.nodeClient.p50',
      section: S,
      figure: 'bare GET /health through node:http’s client, p50',
      value: ns.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'the bench’s client', value: bs.p50 },
      note: 'why the bench speaks HTTP over its own socket (scripts/bench/client.ts): node:http’s client alone costs the difference on every request, which would count as the bridge’s',
    }),
  );
  ctx.details['scratchpad'] = {
    http: { done: roundSummary(h), firstEvent: roundSummary(firstHttp) },
    plainNode: { done: roundSummary(p) },
    floor: { done: roundSummary(f) },
    direct: { done: roundSummary(d), firstOutput: roundSummary(firstDirect) },
    health: roundSummary(hs),
    bareHealth: roundSummary(bs),
    bareHealthNodeHttpClient: roundSummary(ns),
    wrongOutputs: bad,
  };
  await benchScript(ctx);
}

/** 1b. marimo-pair's execute-code.sh (forks bash, curl and jq): absolute figures and a fork floor. */
async function benchScript(ctx: Ctx): Promise<void> {
  const dir = process.env['MARIMO_PAIR_SCRIPTS'];
  const script = dir && path.join(path.resolve(dir), 'execute-code.sh');
  if (!script || !fs.existsSync(script)) {
    say('1b. execute-code.sh: skipped (set MARIMO_PAIR_SCRIPTS to the marimo-pair scripts folder)');
    ctx.details['script'] = { skipped: 'MARIMO_PAIR_SCRIPTS not set or has no execute-code.sh' };
    return;
  }
  say(`1b. execute-code.sh: ${SCRIPT_RUNS} runs, and as many bash -c true + curl /health`);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: ctx.sandbox.dirs.home,
    XDG_STATE_HOME: ctx.sandbox.dirs.stateHome,
    MARIMO_TOKEN: ctx.advert.token ?? '',
  };
  delete env['AGENT_BRIDGE_SANDBOX'];
  const nb = ctx.agents[0]!.path;
  const runs: number[] = [];
  const floor: number[] = [];
  let bad = 0;
  for (let i = 0; i < SCRIPT_RUNS + 2; i++) {
    const r = await timedSpawn('bash', [script, '--url', ctx.advert.url, '--file', nb, '-c', 'print(1)'], env);
    if (r.code !== 0 || !r.stdout.startsWith('1\n')) bad++;
    const a = await timedSpawn('bash', ['-c', 'true'], env);
    const b = await timedSpawn('curl', ['-sf', '-o', '/dev/null', `${ctx.advert.url}/health`], env);
    if (i >= 2) {
      runs.push(r.ms);
      floor.push(a.ms + b.ms);
    }
  }
  if (bad) ctx.problems.push(`execute-code.sh: ${bad} runs failed`);
  const s = summarize(runs);
  const f = summarize(floor);
  for (const k of ['p50', 'p95'] as const) {
    ctx.rows.push(
      row({
        id: `scratchpad.script.${k}`,
        section: '1 scratchpad',
        figure: `execute-code.sh -c 'print(1)', ${k}`,
        value: s[k],
        unit: 'ms',
        better: 'lower',
        baseline: { label: 'bash -c true + curl /health', value: f[k] },
        ...(k === 'p50'
          ? { note: 'the script forks bash, 2 curls and ~5 jq per run; absolute figures, the floor is only the fork cost' }
          : {}),
      }),
    );
  }
  ctx.details['script'] = { runs: roundSummary(s), floor: roundSummary(f), failed: bad };
}

/**
 * 2. PATCH a cell (then GET it) vs. GET alone. A PATCH with the cell's current text goes through
 * the same route and checks but plans no change, so VS Code's applyEdit is skipped: the
 * difference between the two PATCHes is the edit's round trip through VS Code.
 */
async function benchEdit(ctx: Ctx): Promise<void> {
  say(`2. cell edit: ${EDIT_RUNS} × (PATCH, GET, PATCH with the same text)`);
  const nb = ctx.lists.get(LIST_SIZES[0]!)!;
  const http = new KeepAliveClient(ctx.advert.url, ctx.advert.token);
  const q = `?notebook=${encodeURIComponent(nb.sid)}`;
  const first = await http.request('GET', `/notebooks/cells${q}`);
  const cells = (JSON.parse(first.body.toString()) as { cells: { id: string; kind: string }[] }).cells;
  const target = cells.find((c) => c.kind === 'code')!.id;
  const cellPath = `/notebooks/cells/${encodeURIComponent(target)}`;
  const patch: number[] = [];
  const confirmed: number[] = [];
  const get: number[] = [];
  const same: number[] = [];
  let patchShowed = 0;
  let getShowed = 0;
  let bad = 0;
  const tag = randomBytes(3).toString('hex');
  const WARM = 5;
  for (let i = 0; i < EDIT_RUNS + WARM; i++) {
    const code = `# edit ${tag} ${i}\nvalue = ${i}`;
    const p = await http.request('PATCH', cellPath, { notebook: nb.sid, code });
    if (p.status !== 200) {
      bad++;
      if (bad === 1) ctx.problems.push(`PATCH ${cellPath}: ${p.status} ${p.body.toString().slice(0, 200)}`);
      continue;
    }
    const g = await http.request('GET', `${cellPath}${q}`);
    const n = await http.request('PATCH', cellPath, { notebook: nb.sid, code });
    if (n.status !== 200) bad++;
    const pCode = (JSON.parse(p.body.toString()) as { cell: { code: string } }).cell.code;
    const gCode = (JSON.parse(g.body.toString()) as { cell: { code: string } }).cell.code;
    if (i < WARM) continue;
    if (pCode === code) patchShowed++;
    if (gCode === code) getShowed++;
    patch.push(p.ms);
    confirmed.push(p.ms + g.ms);
    get.push(g.ms);
    same.push(n.ms);
  }
  http.close();
  if (bad) ctx.problems.push(`cell edit: ${bad} PATCHes failed`);
  const ps = summarize(patch);
  const cs = summarize(confirmed);
  const gs = summarize(get);
  const ns = summarize(same);
  const S = '2 cell edit';
  for (const k of ['p50', 'p95'] as const) {
    ctx.rows.push(
      row({
        id: `edit.patch.${k}`,
        section: S,
        figure: `PATCH /notebooks/cells/<id>, ${k}`,
        value: ps[k],
        unit: 'ms',
        better: 'lower',
        baseline: { label: 'GET /notebooks/cells/<id>', value: gs[k] },
        ...(k === 'p50'
          ? {
              note: `the PATCH response already carried the new text in ${patchShowed}/${patch.length} runs (it answers after the edit applied); a GET right after showed it in ${getShowed}/${patch.length}`,
            }
          : {}),
      }),
    );
  }
  ctx.rows.push(
    row({
      id: 'edit.confirmed.p50',
      section: S,
      figure: 'PATCH then GET showing the text, p50',
      value: cs.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'GET', value: gs.p50 },
    }),
    row({
      id: 'edit.same.p50',
      section: S,
      figure: 'PATCH with unchanged text (no applyEdit), p50',
      value: ns.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'GET', value: gs.p50 },
      note: 'PATCH p50 minus this is VS Code’s workspace.applyEdit round trip (extension host → workbench → back)',
    }),
  );
  ctx.details['edit'] = {
    patch: roundSummary(ps),
    patchThenGet: roundSummary(cs),
    get: roundSummary(gs),
    patchSameText: roundSummary(ns),
    patchResponseShowedNewText: patchShowed,
    getShowedNewText: getShowed,
    runs: patch.length,
    failed: bad,
  };
}

/** 3. GET /notebooks/cells at 10 … 5,000 cells; the same notebooks listed by plain Node alongside. */
async function benchList(ctx: Ctx): Promise<void> {
  say(`3. listing: ${LIST_SIZES.join(', ')} cells, ${LIST_RUNS} runs each (and plain Node)`);
  const http = new KeepAliveClient(ctx.advert.url, ctx.advert.token);
  const plain = new KeepAliveClient(ctx.plain.url, ctx.plain.token);
  const per: Record<string, unknown> = {};
  let base: { ms: number; bytes: number } | undefined;
  const S = '3 list cells';
  for (const n of LIST_SIZES) {
    const nb = ctx.lists.get(n)!;
    const times: number[] = [];
    const plainTimes: number[] = [];
    let bytes = 0;
    let plainBytes = 0;
    for (let i = 0; i < LIST_RUNS + 2; i++) {
      const r = await http.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(nb.sid)}`);
      if (r.status !== 200) throw new Error(`GET /notebooks/cells (${n} cells): ${r.status} ${r.body.toString().slice(0, 200)}`);
      const pr = await plain.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(ctx.plain.notebooks[n]!)}`);
      if (i === 0) {
        const count = (JSON.parse(r.body.toString()) as { cells: unknown[] }).cells.length;
        if (count !== n) ctx.problems.push(`listing: the ${n}-cell notebook listed ${count} cells`);
      }
      bytes = r.body.length;
      plainBytes = pr.body.length;
      if (i >= 2) {
        times.push(r.ms);
        plainTimes.push(pr.ms);
      }
    }
    const s = summarize(times);
    const ps = summarize(plainTimes);
    base ??= { ms: s.p50, bytes };
    const label = n.toLocaleString('en-US');
    ctx.rows.push(
      row({
        id: `list.${n}.ms`,
        section: S,
        figure: `${label} cells: time (median)`,
        value: s.p50,
        unit: 'ms',
        better: 'lower',
        baseline: { label: 'same code, plain Node', value: ps.p50 },
        ...(n === 1000 ? { target: { text: '< 50 ms', met: s.p50 < 50 } } : {}),
      }),
      row({
        id: `list.${n}.perCell`,
        section: S,
        figure: `${label} cells: time per cell`,
        value: (s.p50 / n) * 1000,
        unit: 'us',
        better: 'lower',
        baseline: { label: `per cell at ${LIST_SIZES[0]}`, value: (base.ms / LIST_SIZES[0]) * 1000 },
      }),
      row({
        id: `list.${n}.bytes`,
        section: S,
        figure: `${label} cells: response size`,
        value: bytes,
        unit: 'B',
        better: 'lower',
        ...(n !== LIST_SIZES[0] ? { baseline: { label: `${LIST_SIZES[0]} cells`, value: base.bytes } } : {}),
        ...(n === LIST_SIZES[LIST_SIZES.length - 1] ? { note: `${(bytes / n).toFixed(0)} bytes per cell` } : {}),
      }),
    );
    per[n] = {
      time: roundSummary(s),
      plainNode: roundSummary(ps),
      bytes,
      plainBytes,
      bytesPerCell: round(bytes / n, 1),
      usPerCell: round((s.p50 / n) * 1000, 2),
      openMs: round(nb.openMs, 0),
    };
  }
  http.close();
  plain.close();
  ctx.details['list'] = per;
  const opens = LIST_SIZES.map((n) => `${n}: ${(ctx.lists.get(n)!.openMs / 1000).toFixed(1)} s`).join(', ');
  const last = ctx.rows[ctx.rows.length - 1]!;
  last.note = `${last.note ? `${last.note}; ` : ''}POST /notebooks/open took ${opens} (no kernel selected; VS Code rendering the editor)`;
}

/** 4. 10 MB of stdout through SSE, with the extension host's RSS sampled every 20 ms. */
async function benchStream(ctx: Ctx): Promise<void> {
  say(`4. stream: ${STREAM_BYTES / 1e6} MB of stdout, ${STREAM_RUNS} runs over HTTP and direct, then one 10 MB write()`);
  const sid = ctx.agents[0]!.sid;
  const http = new KeepAliveClient(ctx.advert.url, ctx.advert.token);
  interface Measured {
    ms: number;
    extraMb: number;
    restMb: number;
    peakMb: number;
    afterMb: number;
    events: number;
    chars: number;
    samples: number;
  }
  const overHttp = async (code: string): Promise<Measured> => {
    const rest = await restingRssKb(ctx.advert.pid);
    const stop = await sampleRss(ctx.advert.pid, 20);
    const r = await http.execute(sid, code, { keepText: false, timeoutMs: 120_000 });
    const peak = await stop();
    await sleep(300);
    const after = await restingRssKb(ctx.advert.pid);
    if (r.stdoutChars !== STREAM_BYTES || r.done?.success !== true || r.error)
      ctx.problems.push(`stream over HTTP: ${r.stdoutChars} chars, done ${JSON.stringify(r.done)}, ${r.error ?? ''}`);
    return {
      ms: r.doneMs,
      extraMb: (Math.max(peak.peakKb, rest) - rest) / 1024,
      restMb: rest / 1024,
      peakMb: peak.peakKb / 1024,
      afterMb: after / 1024,
      events: r.events,
      chars: r.stdoutChars,
      samples: peak.samples,
    };
  };
  const viaHttp: Measured[] = [];
  const direct: { ms: number; extraMb: number; chars: number }[] = [];
  for (let i = 0; i < STREAM_RUNS; i++) {
    viaHttp.push(await overHttp(STREAM_CODE));
    const ownRest = await restingRssKb(process.pid);
    const ownStop = await sampleRss(process.pid, 20);
    const d = await directRun(ctx.direct, STREAM_CODE, false);
    const ownPeak = await ownStop();
    if (d.chars !== STREAM_BYTES || !d.result.success) ctx.problems.push(`stream direct: ${d.chars} chars`);
    direct.push({ ms: d.ms, extraMb: (Math.max(ownPeak.peakKb, ownRest) - ownRest) / 1024, chars: d.chars });
    await sleep(300);
  }
  const big = await overHttp(`import sys\nsys.stdout.write('x' * ${STREAM_BYTES})\n`);
  http.close();
  const wall = median(viaHttp.map((r) => r.ms));
  const dWall = median(direct.map((r) => r.ms));
  const extra = Math.max(...viaHttp.map((r) => r.extraMb));
  const dExtra = Math.max(...direct.map((r) => r.extraMb));
  const S = '4 stream 10 MB';
  const rss = (r: Measured) => `${r.restMb.toFixed(0)}/${r.peakMb.toFixed(0)}/${r.afterMb.toFixed(0)} MB (${r.samples} samples)`;
  ctx.rows.push(
    row({
      id: 'stream.wall',
      section: S,
      figure: '100,000 writes of 100 B: wall time to done (median)',
      value: wall,
      unit: 'ms',
      better: 'lower',
      baseline: { label: 'KernelProcess', value: dWall },
      note: `${viaHttp[0]!.events} SSE events per run; ${(STREAM_BYTES / 1e6 / (wall / 1000)).toFixed(1)} MB/s over HTTP`,
    }),
    row({
      id: 'stream.extraMemory',
      section: S,
      figure: 'ext host peak extra RSS (worst run)',
      value: extra,
      unit: 'MB',
      better: 'lower',
      baseline: { label: 'bench process, direct', value: dExtra },
      target: { text: '≤ 50 MB', met: extra <= 50 },
      note: `ext host RSS before/peak/after: ${viaHttp.map(rss).join(', ')}`,
    }),
    row({
      id: 'stream.oneWrite.wall',
      section: S,
      figure: 'one 10 MB write(): wall time to done',
      value: big.ms,
      unit: 'ms',
      better: 'lower',
      note: `${big.events} SSE events`,
    }),
    row({
      id: 'stream.oneWrite.extraMemory',
      section: S,
      figure: 'one 10 MB write(): ext host peak extra RSS',
      value: big.extraMb,
      unit: 'MB',
      better: 'lower',
      target: { text: '≤ 50 MB', met: big.extraMb <= 50 },
      note: `ext host RSS before/peak/after: ${rss(big)}`,
    }),
  );
  const r1 = (o: object) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, round(v as number, 1)]));
  ctx.details['stream'] = { bytes: STREAM_BYTES, http: viaHttp.map(r1), direct: direct.map(r1), oneWrite: r1(big) };
}

/** 5. 8 agents on 8 notebooks at once, every run printing its own token; vs. 1 agent alone. */
async function benchAgents(ctx: Ctx): Promise<void> {
  say(`5. agents: 1 agent × ${AGENT_RUNS} runs, then ${AGENTS} agents × ${AGENT_RUNS} runs at once`);
  const salt = randomBytes(3).toString('hex');
  const tokenRe = /tok-a\d+-r\d+-[0-9a-f]{6}/g;
  type Outcome = { ok: boolean; crossTalk: boolean; failure?: string; ms: number };
  const runAgent = async (agent: number, nb: Opened): Promise<Outcome[]> => {
    const http = new KeepAliveClient(ctx.advert.url, ctx.advert.token);
    const out: Outcome[] = [];
    for (let i = 0; i < AGENT_RUNS; i++) {
      const token = `tok-a${agent}-r${i}-${salt}`;
      const r = await http.execute(nb.sid, `print(${JSON.stringify(token)})`, { timeoutMs: 60_000 });
      const seen = r.raw.match(tokenRe) ?? [];
      const crossTalk = seen.some((t) => t !== token);
      let failure: string | undefined;
      if (r.error) failure = r.error;
      else if (r.status !== 200) failure = `status ${r.status}: ${r.raw.slice(0, 120)}`;
      else if (r.framingErrors) failure = `${r.framingErrors} framing errors`;
      else if (r.done?.success !== true) failure = `done ${JSON.stringify(r.done)}`;
      else if (r.stdout !== `${token}\n` || r.stderr)
        failure = `stdout ${JSON.stringify(r.stdout.slice(0, 120))} stderr ${JSON.stringify(r.stderr.slice(0, 120))}`;
      out.push({ ok: !failure && !crossTalk, crossTalk, failure, ms: r.doneMs });
    }
    http.close();
    return out;
  };
  // Every kernel started and warm before the clock runs.
  await Promise.all(ctx.agents.map((nb) => warm(ctx.advert, nb.sid)));

  let start = performance.now();
  const single = await runAgent(99, ctx.agents[0]!);
  const singleS = (performance.now() - start) / 1000;
  start = performance.now();
  const many = await Promise.all(ctx.agents.slice(0, AGENTS).map((nb, k) => runAgent(k, nb)));
  const manyS = (performance.now() - start) / 1000;
  const all = many.flat();
  const failures = all.filter((o) => o.failure).length + single.filter((o) => o.failure).length;
  const crossTalk = all.filter((o) => o.crossTalk).length;
  const firstFailure = [...single, ...all].find((o) => o.failure)?.failure;
  if (firstFailure) ctx.problems.push(`agents: first failure: ${firstFailure}`);
  const S = '5 8 agents';
  const tput = all.length / manyS;
  const singleTput = single.length / singleS;
  const lat = summarize(all.map((o) => o.ms));
  const singleLat = summarize(single.map((o) => o.ms));
  ctx.rows.push(
    row({
      id: 'agents.throughput',
      section: S,
      figure: `${AGENTS} agents × ${AGENT_RUNS} runs: throughput`,
      value: tput,
      unit: 'runs/s',
      better: 'higher',
      baseline: { label: '1 agent sequential', value: singleTput },
    }),
    row({
      id: 'agents.latency.p50',
      section: S,
      figure: 'per-run latency under 8-way load, p50',
      value: lat.p50,
      unit: 'ms',
      better: 'lower',
      baseline: { label: '1 agent', value: singleLat.p50 },
    }),
    row({
      id: 'agents.failures',
      section: S,
      figure: 'failed requests',
      value: failures,
      unit: 'count',
      better: 'lower',
      target: { text: '0', met: failures === 0 },
    }),
    row({
      id: 'agents.crossTalk',
      section: S,
      figure: 'runs that saw another run’s token',
      value: crossTalk,
      unit: 'count',
      better: 'lower',
      target: { text: '0', met: crossTalk === 0 },
    }),
  );
  ctx.details['agents'] = {
    agents: AGENTS,
    runsEach: AGENT_RUNS,
    wallS: round(manyS),
    singleWallS: round(singleS),
    latency: roundSummary(lat),
    singleLatency: roundSummary(singleLat),
    failures,
    crossTalk,
    firstFailure,
  };
}

// ------------------------------------------------------------------------------- activation

/** `2026-11-22 15:10:48.005` (VS Code's log timestamps, local time) → epoch ms. */
function logTime(line: string): number | undefined {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})/.exec(line);
  return m ? new Date(`${m[1]}T${m[2]}`).getTime() : undefined;
}

function walkFiles(dir: string, out: string[] = [], depth = 0): string[] {
  if (depth > 6) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) walkFiles(full, out, depth + 1);
    else if (e.isFile() && e.name.endsWith('.log')) out.push(full);
  }
  return out;
}

/**
 * VS Code logs when it starts activating an extension (exthost.log) and the extension logs when
 * its server listens: the gap is activate() including loading the bundle.
 */
function activationFromLogs(sandbox: Sandbox): { activateMs: number; from: string; to: string } | undefined {
  const roots = [path.join(sandbox.dirs.userData, 'logs'), sandbox.dirs.logs].filter((d) => fs.existsSync(d));
  let from: { t: number; file: string } | undefined;
  let to: { t: number; file: string } | undefined;
  for (const file of roots.flatMap((r) => walkFiles(r))) {
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!from && /_doActivateExtension agent-bridge\.agent-bridge\b/.test(line)) {
        const t = logTime(line);
        if (t !== undefined) from = { t, file };
      }
      if (!to && line.includes('bridge listening on')) {
        const t = logTime(line);
        if (t !== undefined) to = { t, file };
      }
    }
  }
  if (!from || !to) return undefined;
  return { activateMs: to.t - from.t, from: path.relative(sandbox.root, from.file), to: path.relative(sandbox.root, to.file) };
}

function benchActivation(ctx: Ctx, stamps: { workbenchOpen: number; discoverySeen: number }, args: Args): void {
  const S = '6 activation & size';
  const fromLogs = activationFromLogs(ctx.sandbox);
  const listenAt = Date.parse(ctx.advert.startedAt);
  if (fromLogs)
    ctx.rows.push(
      row({
        id: 'activation.activate',
        section: S,
        figure: 'activate(): VS Code starts activating → server listening',
        value: fromLogs.activateMs,
        unit: 'ms',
        better: 'lower',
        note: `from ${fromLogs.from} (“_doActivateExtension”) to ${fromLogs.to} (“bridge listening on”), 1 ms log resolution`,
      }),
    );
  else ctx.problems.push('activation: the log lines were not found (exthost.log _doActivateExtension / "bridge listening on")');
  ctx.rows.push(
    row({
      id: 'activation.workbenchToListen',
      section: S,
      figure: 'workbench page loaded → bridge listening',
      value: listenAt - stamps.workbenchOpen,
      unit: 'ms',
      better: 'lower',
      note: 'includes the extension host starting and onStartupFinished; uses the advert’s startedAt (extension host clock)',
    }),
  );
  const js = path.join(REPO_ROOT, 'dist', 'extension.js');
  const jsBytes = fs.statSync(js, { throwIfNoEntry: false })?.size ?? NaN;
  const vsixBytes = fs.statSync(args.vsix, { throwIfNoEntry: false })?.size ?? NaN;
  ctx.rows.push(
    row({ id: 'size.extensionJs', section: S, figure: 'dist/extension.js', value: jsBytes, unit: 'B', better: 'lower' }),
    row({ id: 'size.vsix', section: S, figure: path.basename(args.vsix), value: vsixBytes, unit: 'B', better: 'lower' }),
  );
  ctx.details['activation'] = {
    fromLogs,
    workbenchOpenAt: new Date(stamps.workbenchOpen).toISOString(),
    discoverySeenAt: new Date(stamps.discoverySeen).toISOString(),
    listeningAt: ctx.advert.startedAt,
    extensionJsBytes: jsBytes,
    vsixBytes,
  };
}

// ---------------------------------------------------------------------------------------- main

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (args.compare.length === 2) {
    console.log(renderCompare(readResults(args.compare[0]!), readResults(args.compare[1]!), path.basename(args.compare[0]!)));
    return 0;
  }
  const wants = (n: number) => !args.only || args.only.has(n);
  LIST_SIZES = args.listSizes;
  const startedAt = new Date().toISOString();
  const others = otherSandboxes();
  if (others.length) say(`warning: other sandboxes are running (${others.join(', ')}): they share the CPUs and skew the figures`);
  const loadStart = os.loadavg();
  if (args.build) build();
  if (!fs.existsSync(args.vsix)) throw new Error(`${args.vsix} not found (run without --no-build, or npm run package)`);

  const workspace = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-bench-')));
  process.on('exit', () => fs.rmSync(workspace, { recursive: true, force: true }));
  const lists = new Map<number, string>();
  for (const n of LIST_SIZES) {
    const file = path.join(workspace, `list-${n}.ipynb`);
    writeNotebook(file, n);
    lists.set(n, file);
  }
  const agentFiles = Array.from({ length: AGENTS }, (_, k) => {
    const file = path.join(workspace, `agent-${k + 1}.ipynb`);
    writeNotebook(file, 3);
    return file;
  });

  let sandbox: Sandbox | undefined;
  let direct: KernelProcess | undefined;
  let plain: PlainServer | undefined;
  let floor: BareServer | undefined;
  let bare: BareServer | undefined;
  const rows: Row[] = [];
  const details: Record<string, unknown> = {};
  const problems: string[] = [];
  let exitCode = 0;
  try {
    let workbenchOpen = 0;
    sandbox = await launchSandbox({
      workspace,
      vsix: args.vsix,
      kind: 'bench',
      env: (dirs) => ({ AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json') }),
      onProgress: (m) => {
        if (m.startsWith('workbench open')) workbenchOpen = Date.now();
        say(m);
      },
    });
    workbenchOpen ||= Date.now();
    const { advert, seenAt } = await findBridge(sandbox, path.join(sandbox.root, 'bridge.json'));
    say(`bridge at ${advert.url}, extension host pid ${advert.pid}`);
    const client = new BridgeClient(advert.url, advert.token);
    // Sequential, as the harness does: each open shows an editor. The small notebooks come first
    // and are timed first: after a large notebook opens, VS Code's renderer lays it out for tens
    // of seconds on a whole core (40 s for 1,000 cells here), so the large ones are opened only
    // for the listing, last. They get no kernel: listing needs none, and selecting one costs
    // VS Code about as much again as the open. An agent notebook is then shown again, so the
    // editor left in front is a small one.
    const agents: Opened[] = [];
    for (const file of agentFiles) agents.push(await open(client, file, 3, true));
    say(`opened ${agents.length} agent notebooks (${agents.map((a) => (a.openMs / 1000).toFixed(1)).join(', ')} s)`);
    const opened = new Map<number, Opened>();
    const openLists = async (sizes: readonly number[]) => {
      for (const n of sizes) {
        opened.set(n, await open(client, lists.get(n)!, n, false));
        say(`opened list-${n}.ipynb in ${opened.get(n)!.openMs.toFixed(0)} ms`);
      }
      await open(client, agentFiles[0]!, 3, true);
    };
    await openLists(LIST_SIZES.slice(0, 1));

    const kernelScript = installedKernelScript(sandbox);
    direct = new KernelProcess({ python: 'python3', script: kernelScript, cwd: workspace });
    await direct.start();
    details['python'] = direct.info?.python;
    plain = await startPlainServer(kernelScript, wants(3) ? LIST_SIZES : LIST_SIZES.slice(0, 1));
    floor = await startFloorServer(kernelScript);
    bare = await startBareServer();
    const ctx: Ctx = {
      sandbox,
      advert,
      client,
      workspace,
      lists: opened,
      agents,
      direct,
      plain,
      floor,
      bare,
      rows,
      details,
      problems,
    };
    // Kernels up before anything is timed.
    await warm(advert, agents[0]!.sid);
    await settle(details, 'before timing', 60_000);

    if (wants(1)) await benchScratchpad(ctx);
    if (wants(2)) await benchEdit(ctx);
    if (wants(4)) await benchStream(ctx);
    if (wants(5)) await benchAgents(ctx);
    if (wants(3)) {
      await openLists(LIST_SIZES.slice(1));
      // VS Code lays out 5,000 cells for minutes; listing is timed with it busy, as a person would see it.
      await settle(details, 'before listing', 30_000);
      await benchList(ctx);
    }
    if (wants(6)) benchActivation(ctx, { workbenchOpen, discoverySeen: seenAt }, args);
  } catch (err) {
    exitCode = 1;
    problems.push(`run broke: ${err instanceof Error ? err.message : String(err)}`);
    if (sandbox) process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
  } finally {
    direct?.dispose();
    plain?.stop();
    floor?.stop();
    bare?.stop();
    if (sandbox) {
      const t = Date.now();
      await sandbox.stop();
      say(`VS Code stopped in ${Date.now() - t} ms`);
    }
    fs.rmSync(workspace, { recursive: true, force: true });
  }

  const results: Results = {
    version: 1,
    startedAt,
    finishedAt: new Date().toISOString(),
    durationS: round((Date.now() - t0) / 1000, 1),
    git: gitInfo(),
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memGb: round(os.totalmem() / 2 ** 30, 1),
      node: process.version,
      python: details['python'],
      loadavgStart: loadStart.map((x) => round(x, 2)),
      loadavgEnd: os.loadavg().map((x) => round(x, 2)),
      otherSandboxesAtStart: others,
      otherSandboxesAtEnd: otherSandboxes(sandbox?.id),
    },
    rows,
    details: { ...details, problems },
  };
  // Sections ran in the order that keeps them apart; the table shows them in their own order.
  rows.sort((a, b) => a.section.localeCompare(b.section, 'en', { numeric: true }));
  console.log(`\n${renderTable(rows)}`);
  const file = writeResults(RESULTS_DIR, results);
  console.log(
    `\nresults: ${path.relative(process.cwd(), file)} (${results.durationS} s; load ${loadStart.map((x) => x.toFixed(2)).join(' ')} → ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')})`,
  );
  if (others.length || (results.machine['otherSandboxesAtEnd'] as string[]).length)
    console.log(
      `warning: other sandboxes ran meanwhile: ${[...new Set([...others, ...(results.machine['otherSandboxesAtEnd'] as string[])])].join(', ')}`,
    );
  if (problems.length) console.log(`problems:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  if (args.compare.length === 1)
    console.log(`\n${renderCompare(readResults(args.compare[0]!), results, path.basename(args.compare[0]!))}`);
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
