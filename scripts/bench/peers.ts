/**
 * `npm run bench -- --peers`: the bridge beside the tools an agent would otherwise use, on the
 * same notebook content and the same workloads, each driven by the same means. Starts the
 * harness's VS Code with the bridge (builtin kernel on the setup venv's Python; the Jupyter
 * extension's ipykernel and the marimo extension's two controllers when their .vsix files are
 * given), a `marimo edit --headless` server, and Jupyter Server + jupyter-mcp-server. The bridge
 * and marimo are driven by the bench's own HTTP/SSE client, jupyter-mcp-server by the MCP SDK
 * client; the script row runs marimo-pair's execute-code.sh (MARIMO_PAIR_SCRIPTS) on the bridge
 * and marimo only. Measures each workload on every target, round-robin; then idle memory, ours
 * against a second sandbox without our extension; writes bench-results/peers-<time>/ (table.md,
 * ratios.svg, figures.json), prints the table, and stops everything it started. A target that
 * cannot start gets its exact error in the table's notes.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { type BridgeAdvert, findBridge } from '../../sandbox-test/checks/context';
import { launchSandbox, readRecord, REPO_ROOT, type Sandbox, sandboxProcesses, STACK } from '../../sandbox-test/vscode';
import { findExtension, type GivenExtension, JUPYTER_ID } from '../../sandbox-test/extensions';
import { MARIMO_ID, marimoUnderTest, openPickingKernel } from '../../sandbox-test/marimoExtension';
import { BenchClient } from './client';
import { roleOf, waitForQuiet } from './machine';
import { writeCodeNotebook, writeMarimoTwin, writeNotebook } from './notebooks';
import { kernelTrees, type KernelKind, processMemory, treeMemory } from './peerMemory';
import { sleep } from '../../src/core/sleep';
import type { PeerColumn, PeerRow } from './peerReport';
import { writePeerResults } from './peerReport';
import { bridgeTarget, jupyterMcpTarget, marimoTarget, type PeerTarget, type Timed } from './peerTargets';
import { p50, percentile } from './report';
import { bareSandbox } from './runAll';
import { errorMessage } from '../../src/core/errorMessage';

/** Small samples: a jupyter-mcp-server execute takes about a second, and the whole run stays within minutes. */
const N = { print: 10, big: 2, frame: 3, run: 6, insert: 6, list: 5, warmup: 2 };
const AGENTS = 8;
const AGENT_RUNS = 3;
const IDLE_READS = 5;

const MAIN_CELLS = ['x = 1', 'import pandas as pd', 'print("ready")'];
const WORKLOADS = {
  print: 'print(1)',
  big: "for _ in range(10_000):\n    print('x' * 99)",
  frame: "import pandas as pd\npd.DataFrame({'n': range(1000), 'sq': [i * i for i in range(1000)]})",
};

/** The marimo extension's two controllers, each on its own copy of the 3-cell notebook. */
const MARIMO_CONTROLLERS = [
  { file: 'main-sandbox.py', column: 'bridge → marimo ext. ("marimo sandbox" controller)', pick: 'marimo sandbox' },
  // The setup's venv as the workspace's .venv, which the Python extension lists (it need not list the venv itself).
  { file: 'main-venv.py', column: 'bridge → marimo ext. (venv controller)', pick: '.venv (Python' },
] as const;

/** The folders each target serves: the same generated content, .ipynb and marimo's .py. */
function makeWorkspace(): { dir: string; bridge: string; jupyter: string; marimo: string; marimoExt: string } {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-peers-')));
  const [bridge, jupyter, marimo, marimoExt] = ['bridge', 'jupyter', 'marimo', 'marimo-ext'].map((d) => path.join(dir, d)) as [
    string,
    string,
    string,
    string,
  ];
  for (const d of [bridge, jupyter, marimo, marimoExt]) fs.mkdirSync(d);
  writeCodeNotebook(path.join(bridge, 'main.ipynb'), MAIN_CELLS);
  writeCodeNotebook(path.join(bridge, 'main-jupyter.ipynb'), MAIN_CELLS);
  writeNotebook(path.join(bridge, 'list.ipynb'), 1000);
  for (const f of ['main.ipynb', 'list.ipynb']) fs.copyFileSync(path.join(bridge, f), path.join(jupyter, f));
  for (const f of ['main', 'list']) writeMarimoTwin(path.join(bridge, `${f}.ipynb`), path.join(marimo, `${f}.py`));
  // The marimo extension's notebooks (read only when it is given).
  for (const c of MARIMO_CONTROLLERS) fs.copyFileSync(path.join(marimo, 'main.py'), path.join(marimoExt, c.file));
  fs.copyFileSync(path.join(marimo, 'list.py'), path.join(marimoExt, 'list.py'));
  fs.symlinkSync(path.dirname(STACK.venvBin), path.join(marimoExt, '.venv'));
  return { dir, bridge, jupyter, marimo, marimoExt };
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
  const allowed = sandbox.page
    .locator('.monaco-dialog-box .monaco-button', { hasText: /^Allow$/ })
    .first()
    .click({ timeout: 90_000 })
    .catch(() => undefined);
  const started = await openPickingKernel(
    sandbox.page,
    control.request('POST', '/notebooks/kernel/start', { notebook: sid, kernel: 'jupyter' }, 180_000),
    'Python 3 (ipykernel)',
  );
  if (started.status !== 200) throw new Error(`POST /notebooks/kernel/start: ${started.status} ${started.text.slice(0, 300)}`);
  const first = await control.execute(sid, 'None', 180_000);
  await allowed;
  if (first.done?.success !== true)
    throw new Error(`the first run on the Jupyter kernel: ${first.error ?? first.stderr.slice(0, 300)}`);
}

/** Opens one of the marimo extension's notebooks with kernel "marimo", picking `pick`'s controller; its first run done. */
async function openMarimo(sandbox: Sandbox, control: BenchClient, file: string, pick: string): Promise<string> {
  const r = await openPickingKernel(
    sandbox.page,
    control.request('POST', '/notebooks/open', { path: file, kernel: 'marimo' }, 180_000),
    pick,
    ['Select Another Kernel'],
  );
  if (r.status !== 200) throw new Error(`POST /notebooks/open ${path.basename(file)}: ${r.status} ${r.text.slice(0, 300)}`);
  const sid = (JSON.parse(r.text) as { session: { id: string } }).session.id;
  const first = await control.execute(sid, 'None', 300_000);
  if (first.done?.success !== true)
    throw new Error(`the first run on ${path.basename(file)}: ${first.error ?? first.stderr.slice(0, 300)}`);
  return sid;
}

/**
 * A sandbox without our extension (the Run All bench's second sandbox, with `more`'s extensions
 * and settings), up beside the bench's own; its extension host's pid, and how to stop it.
 */
async function withoutUs(
  say: (m: string) => void,
  more: Parameters<typeof bareSandbox>[2],
): Promise<{ hostPid: number; stop(): Promise<void> }> {
  const bare = await bareSandbox(say, STACK.venvPython, more);
  const stop = async () => {
    await bare.sandbox.stop();
    fs.rmSync(bare.dir, { recursive: true, force: true });
  };
  const record = readRecord(bare.sandbox.id);
  const host = (record ? sandboxProcesses(record) : []).find((p) => roleOf(p.cmdline) === 'extensionHost');
  if (!host) {
    await stop();
    throw new Error('no extension host in the sandbox without our extension');
  }
  return { hostPid: host.pid, stop };
}

export async function runPeers(opts: { vsix: string; extensions: GivenExtension[]; say(msg: string): void }): Promise<number> {
  const { say } = opts;
  const scripts = process.env.MARIMO_PAIR_SCRIPTS;
  const hasScripts = !!scripts && fs.existsSync(path.join(scripts, 'execute-code.sh'));
  const ws = makeWorkspace();
  const startedAt = new Date().toISOString();
  const jupyter = findExtension(opts.extensions, JUPYTER_ID);
  const marimoExt = findExtension(opts.extensions, MARIMO_ID);
  const marimo = 'extension' in marimoExt ? marimoUnderTest(opts.extensions, ws.dir) : undefined;
  const noMarimo = 'skip' in marimoExt ? marimoExt.skip : undefined;
  const cols: PeerColumn[] = [
    { name: 'bridge builtin', ours: true },
    { name: 'bridge → ipykernel (Jupyter ext.)', ours: true, missing: 'skip' in jupyter ? jupyter.skip : undefined },
    ...MARIMO_CONTROLLERS.map((c) => ({ name: c.column, ours: true, missing: noMarimo })),
    { name: 'marimo edit', ours: false },
    { name: 'Jupyter + jupyter-mcp-server', ours: false },
  ];
  const MARIMO_EDIT = cols.length - 2;
  const JUPYTER_MCP = cols.length - 1;
  /** What each bridge column's kernel runs as, under the extension host (for its memory). */
  const kernelOf: (KernelKind | undefined)[] = ['builtin', 'jupyter', 'marimo', 'marimo', undefined, undefined];
  const targets: (PeerTarget | undefined)[] = cols.map(() => undefined);
  const rows: PeerRow[] = [];
  let sandbox: Sandbox | undefined;
  let marimoSandbox: Sandbox | undefined;
  let bareStarted: Promise<Awaited<ReturnType<typeof withoutUs>> | Error> | undefined;
  /** The extension host of each sandbox (the bridge's process). */
  const hosts = { main: 0, marimo: 0 };
  let exitCode = 0;
  const problems: string[] = [];
  if (!hasScripts) problems.push(`MARIMO_PAIR_SCRIPTS (${scripts ?? 'unset'}) has no execute-code.sh: the script row is n/a`);
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
    startPeer(MARIMO_EDIT, () => marimoTarget(ws.marimo, hasScripts ? scripts : undefined, path.join(STACK.venvBin, 'marimo'))),
    startPeer(JUPYTER_MCP, () => jupyterMcpTarget(ws.jupyter, STACK.venvBin)),
  ]);
  const others = opts.extensions.map((e) => e.vsix);
  /** The parts of the memory figures, for figures.json, and its rows (printed after the timed ones). */
  const memory: { rows: PeerRow[] } & Record<string, unknown> = { rows: [] };
  try {
    // The bridge in the harness's isolated VS Code, its builtin kernel on the venv's Python
    // (pandas), with the Jupyter extension when given; the marimo extension (with the Python
    // extension it needs) in a second one, as with it Jupyter lists no kernelspec in its picker.
    const mainOthers = others.filter((v) => v === ('extension' in jupyter ? jupyter.extension.vsix : undefined));
    const marimoOthers = others.filter((v) => !mainOthers.includes(v));
    const launch = (workspace: string, otherVsix: string[], more?: typeof marimo) =>
      launchSandbox({
        workspace,
        vsix: opts.vsix,
        kind: 'bench',
        settings: { 'agentBridge.pythonPath': STACK.venvPython, ...more?.settings },
        otherVsix,
        venvKernelspec: otherVsix.length > 0,
        env: (dirs) => ({ ...more?.env, AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json') }),
        onProgress: say,
      });
    // The sandbox without our extension starts now too, so that its extension host has idled as
    // long as ours when both are read (a young Node heap holds more, until it is collected).
    bareStarted = withoutUs(say, { otherVsix: mainOthers }).catch((e: unknown) => e as Error);
    const launched = await Promise.allSettled([
      launch(ws.bridge, mainOthers),
      marimo ? launch(ws.marimoExt, marimoOthers, marimo) : Promise.resolve(undefined),
    ]);
    if (launched[1].status === 'fulfilled') marimoSandbox = launched[1].value;
    else for (const k of MARIMO_CONTROLLERS.keys()) cols[2 + k]!.missing = errorMessage(launched[1].reason);
    if (launched[0].status === 'rejected') throw launched[0].reason;
    sandbox = launched[0].value;
    const connect = async (box: Sandbox, folder: string) => {
      const advert: BridgeAdvert = await findBridge(box, path.join(box.root, 'bridge.json'));
      const control = new BenchClient(advert.url, advert.token);
      const open = async (file: string, kernel?: 'builtin') => {
        const r = await control.request('POST', '/notebooks/open', { path: path.join(folder, file), kernel }, 180_000);
        if (r.status !== 200) throw new Error(`POST /notebooks/open ${file}: ${r.status} ${r.text.slice(0, 300)}`);
        return (JSON.parse(r.text) as { session: { id: string } }).session.id;
      };
      return {
        advert,
        control,
        open,
        bridge: { url: advert.url, token: advert.token, scripts: hasScripts ? scripts : undefined },
      };
    };
    const first = await connect(sandbox, ws.bridge);
    hosts.main = first.advert.pid;
    const list = await first.open('list.ipynb');
    const main = await first.open('main.ipynb', 'builtin');
    if ((await first.control.execute(main, 'None', 120_000)).done?.success !== true)
      throw new Error('no builtin kernel for main.ipynb');
    targets[0] = bridgeTarget(cols[0]!.name, { ...first.bridge, list, main, mainPath: path.join(ws.bridge, 'main.ipynb') });
    if ('extension' in jupyter) {
      const mainPath = path.join(ws.bridge, 'main-jupyter.ipynb');
      const sid = await first.open('main-jupyter.ipynb');
      try {
        await startJupyterKernel(sandbox, first.control, sid);
        targets[1] = bridgeTarget(cols[1]!.name, { ...first.bridge, list, main: sid, mainPath });
      } catch (e) {
        cols[1]!.missing = errorMessage(e);
      }
    }
    await first.control.close();
    if (marimoSandbox) {
      say("opening the marimo extension's notebooks, one per controller");
      const second = await connect(marimoSandbox, ws.marimoExt);
      hosts.marimo = second.advert.pid;
      // One at a time: each may show VS Code's kernel picker, and only one shows at once.
      const sids: (string | undefined)[] = [];
      for (const [k, c] of MARIMO_CONTROLLERS.entries()) {
        try {
          sids.push(await openMarimo(marimoSandbox, second.control, path.join(ws.marimoExt, c.file), c.pick));
        } catch (e) {
          cols[2 + k]!.missing = errorMessage(e);
          sids.push(undefined);
        }
      }
      // The 1,000-cell twin, once marimo's language server is up (it reads the file).
      const marimoList = sids.some(Boolean) ? await second.open('list.py').catch((e: unknown) => e as Error) : undefined;
      for (const [k, c] of MARIMO_CONTROLLERS.entries()) {
        const sid = sids[k];
        if (!sid || !marimoList) continue;
        if (marimoList instanceof Error) cols[2 + k]!.missing = `opening list.py: ${marimoList.message}`;
        else
          targets[2 + k] = bridgeTarget(c.column, {
            ...second.bridge,
            list: marimoList,
            main: sid,
            mainPath: path.join(ws.marimoExt, c.file),
          });
      }
      await second.control.close();
    }

    await peersStarted;
    for (const t of targets) if (t) await t.scratch('None'); // every kernel started and warm

    // Idle memory, before the workloads, with a sandbox without our extension up beside ours,
    // both read at the same moment (PSS shares the pages of code-server's Node among its processes).
    say('idle memory, with a sandbox without our extension beside ours');
    const bare = await bareStarted;
    if (bare instanceof Error) throw new Error(`the sandbox without our extension: ${bare.message}`);
    try {
      await waitForQuiet(0.15, 30_000);
      // The median of a few reads 2 s apart: a Node heap's PSS moves by tens of MB as it collects.
      const reads: { idle: number[]; without: number }[] = [];
      for (let k = 0; k < IDLE_READS; k++, await sleep(2_000)) {
        const host = processMemory(hosts.main);
        const trees = kernelTrees(hosts.main);
        const marimoHost = hosts.marimo ? processMemory(hosts.marimo) : { pss: NaN, rss: NaN };
        const marimoTrees = hosts.marimo ? kernelTrees(hosts.marimo) : undefined;
        reads.push({
          without: processMemory(bare.hostPid).pss,
          idle: targets.map((t, i) => {
            const kind = kernelOf[i];
            if (!t) return NaN;
            if (!kind) return treeMemory(t.pids?.() ?? []).pss;
            if (kind === 'marimo') return marimoHost.pss + (marimoTrees?.marimo.pss ?? NaN);
            return host.pss + trees[kind].pss;
          }),
        });
        if (k === 0) Object.assign(memory, { extensionHost: host, trees, marimoExtensionHost: marimoHost, marimoTrees });
      }
      const without = p50(reads.map((r) => r.without));
      memory.withoutUs = without;
      memoryRows(
        cols.map((_, i) => p50(reads.map((r) => r.idle[i]!))),
        without,
      );
    } finally {
      await bare.stop();
    }

    const q = await waitForQuiet(0.15, 20_000);
    if (!q.quiet) problems.push(`the machine stayed ${(q.busy * 100).toFixed(0)}% busy: timings are noisy`);

    const timedRows = async (
      workload: string,
      runs: number,
      step: (t: PeerTarget) => Promise<Timed> | undefined,
      check: (r: Timed) => boolean,
      more: { warmup?: number; differs?: string } = {},
    ) => {
      const warmup = more.warmup ?? N.warmup;
      say(`${workload}: ${warmup} + ${runs} rounds`);
      const r = await rounds(targets, runs, step, check, warmup);
      const notes = r.failed.map((f, j) => (f ? `${f} failed: ${r.first[j]}` : undefined));
      rows.push(
        {
          workload: `${workload}, p50`,
          unit: 'ms',
          lowerIsBetter: true,
          values: r.ms.map((s) => p50(s)),
          notes,
          differs: more.differs,
        },
        {
          workload: `${workload}, p95`,
          unit: 'ms',
          lowerIsBetter: true,
          values: r.ms.map((s) => percentile(s, 95)),
          differs: more.differs,
        },
      );
    };
    const printed = (r: Timed) => r.ok && r.out.trim() === '1';
    await timedRows('scratchpad print(1)', N.print, (t) => t.scratch(WORKLOADS.print), printed);
    await timedRows('print(1) through execute-code.sh', N.print, (t) => t.scriptScratch?.(WORKLOADS.print), printed);
    await timedRows(
      '1 MB of stdout, all of it at the client',
      N.big,
      (t) => t.whole(WORKLOADS.big),
      (r) => r.ok && r.out.length >= 1_000_000,
      {
        warmup: 1,
      },
    );
    await timedRows(
      'trailing value: 1,000-row DataFrame',
      N.frame,
      (t) => t.scratch(WORKLOADS.frame),
      (r) => r.ok,
      {
        differs: 'each formats the value its own way',
      },
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
      ...memory.rows,
    );
  } catch (err) {
    exitCode = 1;
    problems.push(`run broke: ${errorMessage(err)}`);
    if (sandbox) process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
  } finally {
    await peersStarted;
    for (const t of targets) await t?.stop();
    await sandbox?.stop();
    await marimoSandbox?.stop();
    const bare = await bareStarted;
    if (bare && !(bare instanceof Error)) await bare.stop();
    fs.rmSync(ws.dir, { recursive: true, force: true });
  }

  /**
   * Idle PSS rows: the peers' whole servers; ours as the extension host with the column's kernel
   * tree, the extension host of the same sandbox without our extension, and the difference: our
   * share. Kept to print after the timed rows.
   */
  function memoryRows(whole: number[], without: number): void {
    // The marimo extension's columns have no baseline: their kernel and language server are marimo's.
    const ours = (i: number) => kernelOf[i] === 'builtin' || kernelOf[i] === 'jupyter';
    const peer = (i: number) => kernelOf[i] === undefined;
    memory.rows = [
      {
        workload: 'idle PSS: whole (ours: extension host + the column’s kernel tree; peers: the server’s tree)',
        unit: 'MB',
        lowerIsBetter: true,
        values: whole,
        differs: 'ours holds VS Code’s extension host',
      },
      {
        workload: 'idle PSS: the same sandbox’s extension host without our extension',
        unit: 'MB',
        lowerIsBetter: true,
        values: whole.map((pss, i) => (ours(i) && Number.isFinite(pss) ? without : NaN)),
        differs: 'the baseline subtracted below',
      },
      {
        workload: 'idle PSS: our share (whole − without us) vs the peers’ whole server',
        unit: 'MB',
        lowerIsBetter: true,
        values: whole.map((pss, i) => (ours(i) ? pss - without : peer(i) ? pss : NaN)),
      },
    ];
    const share = whole[0]! - without;
    const marimoWhole = whole[MARIMO_EDIT]!;
    if (Number.isFinite(share) && Number.isFinite(marimoWhole))
      problems.push(
        `target, our share ≤ marimo edit's whole server: ${share.toFixed(1)} MB vs ${marimoWhole.toFixed(1)} MB: ${share <= marimoWhole ? 'met' : 'MISSED'}`,
      );
  }

  const out = path.join(REPO_ROOT, 'bench-results', `peers-${startedAt.replace(/[:.]/g, '-')}`);
  const md = writePeerResults(out, rows, cols, { startedAt, problems, memory, loadavg: os.loadavg(), cpus: os.cpus().length });
  console.log(`\n${md}\n\nresults: ${path.relative(process.cwd(), out)}/ (table.md, ratios.svg, figures.json)`);
  if (problems.length) console.log(`problems:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  return exitCode;
}
