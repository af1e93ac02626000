/**
 * `npm run bench -- --peers`: the bridge beside the tools an agent would otherwise use, on the
 * same notebook content and the same workloads. Starts the harness's VS Code with the bridge
 * (builtin kernel on the setup venv's Python), a `marimo edit --headless` server driven with
 * marimo-pair's execute-code.sh (MARIMO_PAIR_SCRIPTS), and Jupyter Server + jupyter-mcp-server
 * driven by the MCP SDK client; measures each workload on every target, round-robin; writes
 * bench-results/peers-<time>/ (table.md, ratios.svg, figures.json), prints the table, and stops
 * everything it started. A peer that cannot start gets its exact error in the table's notes.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type BridgeAdvert, findBridge } from '../../sandbox-test/checks/context';
import { launchSandbox, REPO_ROOT, type Sandbox, STACK } from '../../sandbox-test/vscode';
import { findExtension, type GivenExtension, JUPYTER_ID } from '../../sandbox-test/extensions';
import { BenchClient } from './client';
import { waitForQuiet } from './machine';
import { writeCodeNotebook, writeMarimoTwin, writeNotebook } from './notebooks';
import type { PeerColumn, PeerRow } from './peerReport';
import { writePeerResults } from './peerReport';
import { bridgeTarget, jupyterMcpTarget, marimoTarget, type PeerTarget, type Timed } from './peerTargets';
import { p50, percentile } from './report';
import { errorMessage } from '../../src/core/errorMessage';

/** Small samples: a jupyter-mcp-server execute takes about a second, and the whole run stays within minutes. */
const N = { print: 10, big: 2, frame: 3, run: 6, insert: 6, list: 5, warmup: 2 };
const AGENTS = 8;
const AGENT_RUNS = 3;

const MAIN_CELLS = ['x = 1', 'import pandas as pd', 'print("ready")'];
const WORKLOADS = {
  print: 'print(1)',
  big: "for _ in range(10_000):\n    print('x' * 99)",
  frame: "import pandas as pd\npd.DataFrame({'n': range(1000), 'sq': [i * i for i in range(1000)]})",
};

/** PSS and RSS of a process and all its descendants, in MB. */
function treeMemory(roots: number[]): { pss: number; rss: number } {
  const parent = new Map<number, number>();
  for (const d of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    const m = /\) \S (\d+)/.exec(safeRead(`/proc/${d}/stat`));
    if (m) parent.set(Number(d), Number(m[1]));
  }
  const all = new Set(roots);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parent) {
      if (!all.has(ppid) || all.has(pid)) continue;
      all.add(pid);
      grew = true;
    }
  }
  let [pss, rss] = [0, 0];
  for (const pid of all) {
    const r = safeRead(`/proc/${pid}/smaps_rollup`);
    pss += Number(/^Pss:\s+(\d+) kB/m.exec(r)?.[1] ?? 0) / 1024;
    rss += Number(/^Rss:\s+(\d+) kB/m.exec(r)?.[1] ?? 0) / 1024;
  }
  return { pss, rss };
}

function safeRead(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return ''; // the process ended meanwhile
  }
}

/** The folders each target serves: the same generated content, .ipynb and marimo's .py. */
function makeWorkspace(): { dir: string; bridge: string; jupyter: string; marimo: string } {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-peers-')));
  const [bridge, jupyter, marimo] = ['bridge', 'jupyter', 'marimo'].map((d) => path.join(dir, d)) as [string, string, string];
  for (const d of [bridge, jupyter, marimo]) fs.mkdirSync(d);
  writeCodeNotebook(path.join(bridge, 'main.ipynb'), MAIN_CELLS);
  writeCodeNotebook(path.join(bridge, 'main-jupyter.ipynb'), MAIN_CELLS);
  writeNotebook(path.join(bridge, 'list.ipynb'), 1000);
  for (const f of ['main.ipynb', 'list.ipynb']) fs.copyFileSync(path.join(bridge, f), path.join(jupyter, f));
  for (const f of ['main', 'list']) writeMarimoTwin(path.join(bridge, `${f}.ipynb`), path.join(marimo, `${f}.py`));
  return { dir, bridge, jupyter, marimo };
}

/** Runs `step` on every target, `warmup + runs` rounds, rotating who goes first; the failures' first detail per target. */
async function rounds(
  targets: readonly (PeerTarget | undefined)[],
  runs: number,
  step: (t: PeerTarget) => Promise<Timed> | undefined,
  check: (r: Timed) => boolean,
  warmup = N.warmup,
): Promise<{ ms: number[][]; failed: number[]; first: (string | undefined)[] }> {
  const ms = targets.map(() => [] as number[]);
  const failed = targets.map(() => 0);
  const first: (string | undefined)[] = targets.map(() => undefined);
  for (let i = 0; i < warmup + runs; i++) {
    for (let k = 0; k < targets.length; k++) {
      const j = (i + k) % targets.length;
      const pending = targets[j] && step(targets[j]);
      if (!pending) continue;
      const r = await pending;
      if (i < warmup) continue;
      if (check(r)) ms[j]!.push(r.ms);
      else {
        failed[j]!++;
        first[j] ??= r.out.slice(0, 160).replace(/\s+/g, ' ');
      }
    }
  }
  return { ms, failed, first };
}

/**
 * Starts main-jupyter.ipynb's kernel through the Jupyter extension, as the person would: pick the
 * venv's kernelspec in the list Jupyter shows, allow the bridge's use of its kernels (once).
 */
async function startJupyterKernel(sandbox: Sandbox, control: BenchClient, sid: string): Promise<void> {
  const click = (selector: string, text: string | RegExp) =>
    sandbox.page.locator(selector, { hasText: text }).first().click({ timeout: 90_000 });
  const allowed = click('.monaco-dialog-box .monaco-button', /^Allow$/).catch(() => undefined);
  const picked = click('.quick-input-widget .monaco-list-row', 'Python 3 (ipykernel)').catch(() => undefined);
  const started = await control.request('POST', '/notebooks/kernel/start', { notebook: sid, kernel: 'jupyter' }, 180_000);
  await picked;
  if (started.status !== 200) throw new Error(`POST /notebooks/kernel/start: ${started.status} ${started.text.slice(0, 300)}`);
  const first = await control.execute(sid, 'None', 180_000);
  await allowed;
  if (first.done?.success !== true)
    throw new Error(`the first run on the Jupyter kernel: ${first.error ?? first.stderr.slice(0, 300)}`);
}

export async function runPeers(opts: { vsix: string; extensions: GivenExtension[]; say(msg: string): void }): Promise<number> {
  const { say } = opts;
  const scripts = process.env.MARIMO_PAIR_SCRIPTS;
  const ws = makeWorkspace();
  const startedAt = new Date().toISOString();
  const jupyter = findExtension(opts.extensions, JUPYTER_ID);
  const cols: PeerColumn[] = [
    { name: 'bridge (builtin kernel)', ours: true },
    { name: 'bridge (ipykernel via Jupyter ext.)', ours: true, missing: 'skip' in jupyter ? jupyter.skip : undefined },
    { name: 'marimo edit + execute-code.sh', ours: false },
    { name: 'Jupyter Server + jupyter-mcp-server', ours: false },
  ];
  const targets: (PeerTarget | undefined)[] = cols.map(() => undefined);
  const rows: PeerRow[] = [];
  let sandbox: Sandbox | undefined;
  let exitCode = 0;
  const problems: string[] = [];
  // The peers start while VS Code does; a peer that cannot start gets its exact error in the table.
  const startPeer = async (i: number, start: () => Promise<PeerTarget>) => {
    try {
      targets[i] = await start();
    } catch (e) {
      cols[i]!.missing = errorMessage(e);
    }
  };
  say('starting marimo edit --headless, Jupyter Server and jupyter-mcp-server');
  const peersStarted = Promise.all([
    startPeer(2, async () => {
      if (!scripts || !fs.existsSync(path.join(scripts, 'execute-code.sh')))
        throw new Error(`MARIMO_PAIR_SCRIPTS (${scripts ?? 'unset'}) has no execute-code.sh`);
      return marimoTarget(ws.marimo, scripts, path.join(STACK.venvBin, 'marimo'));
    }),
    startPeer(3, () => jupyterMcpTarget(ws.jupyter, STACK.venvBin)),
  ]);
  try {
    // The bridge, in the harness's isolated VS Code, its builtin kernel on the venv's Python (pandas).
    sandbox = await launchSandbox({
      workspace: ws.bridge,
      vsix: opts.vsix,
      kind: 'bench',
      settings: { 'agentBridge.pythonPath': STACK.venvPython },
      otherVsix: 'extension' in jupyter ? opts.extensions.map((e) => e.vsix) : [],
      venvKernelspec: 'extension' in jupyter,
      env: (dirs) => ({ AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json') }),
      onProgress: say,
    });
    const advert: BridgeAdvert = await findBridge(sandbox, path.join(sandbox.root, 'bridge.json'));
    const control = new BenchClient(advert.url, advert.token);
    const open = async (file: string, kernel?: 'builtin') => {
      const r = await control.request('POST', '/notebooks/open', { path: path.join(ws.bridge, file), kernel }, 180_000);
      if (r.status !== 200) throw new Error(`POST /notebooks/open ${file}: ${r.status} ${r.text.slice(0, 300)}`);
      return (JSON.parse(r.text) as { session: { id: string } }).session.id;
    };
    const list = await open('list.ipynb');
    const main = await open('main.ipynb', 'builtin');
    if ((await control.execute(main, 'None', 120_000)).done?.success !== true)
      throw new Error('no builtin kernel for main.ipynb');
    const bridge = { url: advert.url, token: advert.token, pid: advert.pid, list, scripts };
    targets[0] = bridgeTarget(cols[0]!.name, { ...bridge, main, mainPath: path.join(ws.bridge, 'main.ipynb') });
    if ('extension' in jupyter) {
      const mainPath = path.join(ws.bridge, 'main-jupyter.ipynb');
      const sid = await open('main-jupyter.ipynb');
      try {
        await startJupyterKernel(sandbox, control, sid);
        targets[1] = bridgeTarget(cols[1]!.name, { ...bridge, main: sid, mainPath });
      } catch (e) {
        cols[1]!.missing = errorMessage(e);
      }
    }
    await control.close();

    await peersStarted;
    for (const t of targets) if (t) await t.scratch('None'); // every kernel started and warm

    const q = await waitForQuiet(0.15, 20_000);
    if (!q.quiet) problems.push(`the machine stayed ${(q.busy * 100).toFixed(0)}% busy: timings are noisy`);
    const idle = targets.map((t) => (t ? treeMemory(t.pids()) : { pss: NaN, rss: NaN }));

    const timedRows = async (
      workload: string,
      runs: number,
      step: (t: PeerTarget) => Promise<Timed> | undefined,
      check: (r: Timed) => boolean,
      warmup = N.warmup,
    ) => {
      say(`${workload}: ${warmup} + ${runs} rounds`);
      const r = await rounds(targets, runs, step, check, warmup);
      const notes = r.failed.map((f, j) => (f ? `${f} failed: ${r.first[j]}` : undefined));
      rows.push(
        { workload: `${workload}, p50`, unit: 'ms', lowerIsBetter: true, values: r.ms.map((s) => p50(s)), notes },
        { workload: `${workload}, p95`, unit: 'ms', lowerIsBetter: true, values: r.ms.map((s) => percentile(s, 95)) },
      );
    };
    const printed = (r: Timed) => r.ok && r.out.trim() === '1';
    await timedRows('scratchpad print(1)', N.print, (t) => t.scratch(WORKLOADS.print), printed);
    await timedRows('print(1) through execute-code.sh', N.print, (t) => t.scriptScratch?.(WORKLOADS.print), printed);
    // No warm-up: through execute-code.sh one run takes marimo tens of seconds.
    const mb = (r: Timed) => r.ok && r.out.length >= 1_000_000;
    await timedRows('1 MB of stdout', N.big, (t) => t.scratch(WORKLOADS.big), mb, 0);
    await timedRows(
      'trailing value: 1,000-row DataFrame',
      N.frame,
      (t) => t.scratch(WORKLOADS.frame),
      (r) => r.ok,
    );
    await timedRows(
      'run a cell and wait for it',
      N.run,
      (t) => t.runCell(),
      (r) => r.ok,
    );
    await timedRows(
      'insert a cell',
      N.insert,
      (t) => t.insert(),
      (r) => r.ok,
    );
    await timedRows(
      'list 1,000 cells',
      N.list,
      (t) => t.list(),
      (r) => r.ok && r.out === '1000',
    );

    say(`${AGENTS} agents × ${AGENT_RUNS} runs at once, each target in turn`);
    const throughput: number[] = [];
    const failures: number[] = [];
    for (const t of targets) {
      if (!t) {
        throughput.push(NaN);
        failures.push(NaN);
        continue;
      }
      const agents = await Promise.all(Array.from({ length: AGENTS }, () => t.agent()));
      let failed = 0;
      const start = performance.now();
      await Promise.all(
        agents.map(async (a, k) => {
          for (let i = 0; i < AGENT_RUNS; i++) {
            const token = `agent-${k}-run-${i}`;
            const r = await a.scratch(`print(${JSON.stringify(token)})`);
            if (!r.ok || r.out.trim() !== token) failed++;
          }
        }),
      );
      throughput.push((AGENTS * AGENT_RUNS) / ((performance.now() - start) / 1000));
      failures.push(failed);
      await Promise.all(agents.map((a) => a.close()));
    }
    rows.push(
      { workload: `${AGENTS} agents at once: throughput`, unit: 'runs/s', lowerIsBetter: false, values: throughput },
      { workload: `${AGENTS} agents at once: failed runs`, unit: 'count', lowerIsBetter: true, values: failures },
      { workload: 'idle memory of the server processes: PSS', unit: 'MB', lowerIsBetter: true, values: idle.map((m) => m.pss) },
      { workload: 'idle memory of the server processes: RSS', unit: 'MB', lowerIsBetter: true, values: idle.map((m) => m.rss) },
    );
  } catch (err) {
    exitCode = 1;
    problems.push(`run broke: ${errorMessage(err)}`);
    if (sandbox) process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
  } finally {
    await peersStarted;
    for (const t of targets) await t?.stop();
    await sandbox?.stop();
    fs.rmSync(ws.dir, { recursive: true, force: true });
  }
  const out = path.join(REPO_ROOT, 'bench-results', `peers-${startedAt.replace(/[:.]/g, '-')}`);
  const md = writePeerResults(out, rows, cols, { startedAt, problems, loadavg: os.loadavg(), cpus: os.cpus().length });
  console.log(`\n${md}\n\nresults: ${path.relative(process.cwd(), out)}/ (table.md, ratios.svg, figures.json)`);
  if (problems.length) console.log(`problems:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  return exitCode;
}
