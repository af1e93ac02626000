/**
 * `npm run bench [-- --no-build] [--vsix FILE] [--only SECTIONS] [--extension FILE]...`
 * `--peers` measures the bridge beside marimo edit and Jupyter + jupyter-mcp-server instead (scripts/bench/peers.ts).
 *
 * What the bridge costs, each figure beside a baseline measured in the same run: packages the
 * extension (unless --no-build), starts the harness's isolated VS Code (sandbox-test/vscode.ts)
 * with it, opens generated notebooks through the bridge, waits for the machine to go quiet, and
 * runs the sections (scripts/bench/sections.ts): scratchpad and framework cost, kernel modes,
 * cell runs, Run All side by side (scripts/bench/runAll.ts: it starts a second sandbox without
 * our extension), insert vs edit with its split (scripts/bench/editSplit.ts), stalled reader,
 * agents, another agent amid a flood of sockets and waits (scripts/bench/lockout.ts), listing, the
 * stale marks' analysis per edit (scripts/bench/staleAnalysis.ts), the cost of recording runs'
 * files (scripts/bench/runFilesCost.ts); then the Jupyter row, memory
 * after the largest batches (lockout.ts), activation and sizes. Prints
 * a table and writes bench-results/<time>.json. The Jupyter row runs when the Jupyter extension is
 * given by path (SANDBOX_EXTENSIONS or --extension, as for the harness: sandbox-test/extensions.ts). Targets print as met/MISSED and fail nothing:
 * the exit code is 1 only when the run broke.
 *
 * The kernels run on Debian's /usr/bin/python3 for the notebook in ipython/ (IPython importable)
 * and on a venv of the same Python without its site packages everywhere else (plain mode), chosen
 * by a small wrapper given as agentBridge.pythonPath (the builtin kernel starts in the notebook's
 * folder).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { KernelProcess } from '../src/kernels/builtin/kernelProcess';
import { type BridgeAdvert as Advert, findBridge } from '../sandbox-test/checks/context';
import { launchSandbox, listRecords, ownerRunning, REPO_ROOT, type Sandbox } from '../sandbox-test/vscode';
import { findExtension, givenExtensions, JUPYTER_ID } from '../sandbox-test/extensions';
import { BenchClient } from './bench/client';
import { startFloor } from './bench/floor';
import { waitForQuiet } from './bench/machine';
import { writeNotebook } from './bench/notebooks';
import { insertVsEdit } from './bench/editSplit';
import { batchMemory, flood } from './bench/lockout';
import { runPeers } from './bench/peers';
import { goal, renderTable, row, type Row, writeResults } from './bench/report';
import { runAllSideBySide } from './bench/runAll';
import { presenceCost } from './bench/presenceCost';
import { staleAnalysis } from './bench/staleAnalysis';
import { runFilesCost } from './bench/runFilesCost';
import * as sections from './bench/sections';
import { errorMessage } from '../src/core/errorMessage';
import { progressLog } from '../sandbox-test/progress';

const SECTIONS = [
  'scratchpad',
  'modes',
  'cells',
  'runall',
  'edits',
  'stall',
  'agents',
  'flood',
  'batch',
  'listing',
  'presence',
  'stale',
  'runfiles',
  'jupyter',
  'memory',
  'activation',
] as const;
const USAGE = `usage: npm run bench -- [--no-build] [--vsix FILE] [--only ${SECTIONS.join(',')}] [--extension FILE]... [--peers]`;
const SYSTEM_PYTHON = '/usr/bin/python3';

const t0 = Date.now();
const say = progressLog('bench');

function options() {
  const { values } = parseArgs({
    options: {
      'no-build': { type: 'boolean', default: false },
      vsix: { type: 'string' },
      only: { type: 'string' },
      extension: { type: 'string', multiple: true },
      peers: { type: 'boolean', default: false },
    },
  });
  const only = values.only?.split(',') ?? [...SECTIONS];
  const unknown = only.filter((s) => !(SECTIONS as readonly string[]).includes(s));
  if (unknown.length) throw new Error(`unknown section ${unknown.join(', ')}\n${USAGE}`);
  return {
    build: !values['no-build'] && !values.vsix,
    vsix: path.resolve(values.vsix ?? path.join(REPO_ROOT, 'dist', 'agent-bridge.vsix')),
    wants: (s: (typeof SECTIONS)[number]) => only.includes(s),
    extensions: givenExtensions(values.extension),
    peers: values.peers,
  };
}

/** The workspace: notebooks, and a plain-mode Python beside Debian's for the kernels to run on. */
function makeWorkspace(): { dir: string; python: string; plainPython: string } {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-bench-')));
  const venv = path.join(dir, '.venv-plain');
  const made = spawnSync(SYSTEM_PYTHON, ['-m', 'venv', '--without-pip', venv], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`${SYSTEM_PYTHON} -m venv failed: ${made.stderr}`);
  const python = path.join(dir, '.python');
  fs.writeFileSync(
    python,
    `#!/bin/sh\ncase "$(pwd -P)" in */ipython) exec ${SYSTEM_PYTHON} "$@";; esac\nexec ${venv}/bin/python "$@"\n`,
    { mode: 0o755 },
  );
  fs.mkdirSync(path.join(dir, 'ipython'));
  for (let k = 1; k <= 8; k++) writeNotebook(path.join(dir, `agent-${k}.ipynb`), 3);
  writeNotebook(path.join(dir, 'ipython', 'ipython.ipynb'), 3);
  writeNotebook(path.join(dir, 'stall.ipynb'), 3);
  writeNotebook(path.join(dir, 'cells.ipynb'), 100, true);
  writeNotebook(path.join(dir, 'runall.ipynb'), 100, true);
  writeNotebook(path.join(dir, 'list-1000.ipynb'), 1000);
  writeNotebook(path.join(dir, 'jupyter.ipynb'), 3);
  writeNotebook(path.join(dir, 'runall-jupyter.ipynb'), 100, true);
  return { dir, python, plainPython: path.join(venv, 'bin', 'python') };
}

/** The first log line matching `pattern` in any .log under `dir`, and its match. */
function logLine(dir: string, pattern: RegExp): { at: number; match: RegExpExecArray } | undefined {
  for (const f of fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as string[]) : []) {
    if (!f.endsWith('.log')) continue;
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      const match = pattern.exec(line);
      // `2026-11-22 15:10:48.005`: VS Code's log timestamps, local time.
      const stamp = match && /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})/.exec(line);
      if (match && stamp) return { at: new Date(`${stamp[1]}T${stamp[2]}`).getTime(), match };
    }
  }
  return undefined;
}

/**
 * VS Code logs when it starts activating us, and the advert says when the server listened; our
 * log says how much of that span ran inside activate() and since our bundle loaded (its own
 * line's timestamp can be written late, so it carries the durations). Between the two VS Code
 * makes our extension context; before the bundle loaded, it loads it. Then the sizes.
 */
function activationRows(sandbox: Sandbox, advert: Advert, installed: string, vsix: string): Row[] {
  const logs = path.join(sandbox.dirs.userData, 'logs');
  const from = logLine(logs, /_doActivateExtension agent-bridge\.agent-bridge\b/)?.at;
  const ours = logLine(logs, /activate\(\) → listening: ([\d.]+) ms \(bundle loaded → listening: ([\d.]+) ms\)/)?.match;
  const [inActivate, sinceLoad] = [Number(ours?.[1] ?? NaN), Number(ours?.[2] ?? NaN)];
  const section = 'activation';
  const size = (file: string) => fs.statSync(file, { throwIfNoEntry: false })?.size ?? NaN;
  const total = Date.parse(advert.startedAt) - (from ?? NaN);
  const missing = (line: string) => ({ na: `no “${line}” line in the logs` });
  const split = (figure: string, value: number) =>
    ours ? row(section, figure, value, 'ms') : row(section, figure, NaN, 'ms', missing('activate() → listening'));
  return [
    from === undefined
      ? row(section, 'activation → server listening', NaN, 'ms', missing('_doActivateExtension agent-bridge.agent-bridge'))
      : row(section, 'activation → server listening', total, 'ms', {
          note: 'from VS Code’s log line to the discovery file’s startedAt, 1 ms resolution',
        }),
    split('  VS Code loading our bundle', total - sinceLoad),
    split('  bundle loaded → listening', sinceLoad),
    split('    VS Code making our extension context', sinceLoad - inActivate),
    // VS Code calls activate() only once the context is made (it is made while the bundle loads):
    // of this span, what runs in our code is activate() → listening.
    ours
      ? row(section, '    ours: activate() → listening', inActivate, 'ms', { target: goal('≤ 10 ms', inActivate <= 10) })
      : row(section, '    ours: activate() → listening', NaN, 'ms', missing('activate() → listening')),
    ...['extension.js', 'composition.js'].map((f) => row('size', `dist/${f}`, size(path.join(installed, f)), 'B')),
    row('size', path.basename(vsix), size(vsix), 'B'),
  ];
}

async function main(): Promise<number> {
  const opts = options();
  // The Jupyter extension shares the extension host with us for the whole run, only when its rows are wanted.
  const jupyter = opts.wants('jupyter') || opts.wants('runall') ? findExtension(opts.extensions, JUPYTER_ID) : undefined;
  const startedAt = new Date().toISOString();
  const others = listRecords()
    .filter(ownerRunning)
    .map((r) => `${r.id} (${r.kind})`);
  if (others.length) say(`warning: other sandboxes are running (${others.join(', ')}): they share the CPUs and skew the figures`);
  if (opts.build) {
    say('npm run package');
    if (spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 2, 2] }).status !== 0)
      throw new Error('npm run package failed');
  }
  if (!fs.existsSync(opts.vsix)) throw new Error(`${opts.vsix} not found (run without --no-build, or npm run package)`);
  if (opts.peers) return runPeers({ vsix: opts.vsix, extensions: opts.extensions, say });
  const ws = makeWorkspace();
  const spansFile = path.join(ws.dir, 'edit-spans.jsonl');
  process.on('exit', () => fs.rmSync(ws.dir, { recursive: true, force: true }));

  const rows: Row[] = [];
  const problems: string[] = [];
  const stops: (() => unknown)[] = [];
  let exitCode = 0;
  let sandbox: Sandbox | undefined;
  try {
    sandbox = await launchSandbox({
      workspace: ws.dir,
      vsix: opts.vsix,
      kind: 'bench',
      settings: { 'agentBridge.pythonPath': ws.python },
      otherVsix: jupyter && 'extension' in jupyter ? opts.extensions.map((e) => e.vsix) : [],
      venvKernelspec: Boolean(jupyter && 'extension' in jupyter),
      env: (dirs) => ({
        AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json'),
        AGENT_BRIDGE_EDIT_SPANS: spansFile,
      }),
      onProgress: say,
    });
    const advert = await findBridge(sandbox, path.join(sandbox.root, 'bridge.json'));
    say(`bridge at ${advert.url}, extension host pid ${advert.pid}`);
    const control = new BenchClient(advert.url, advert.token);
    stops.push(() => control.close());
    const open = async (file: string, kernel?: 'builtin'): Promise<sections.Opened> => {
      const r = await control.request('POST', '/notebooks/open', { path: file, kernel }, 180_000);
      if (r.status !== 200) throw new Error(`POST /notebooks/open ${path.basename(file)}: ${r.status} ${r.text.slice(0, 300)}`);
      const sid = (JSON.parse(r.text) as { session: { id: string } }).session.id;
      // Its kernel started and warm before anything is timed.
      if (kernel && (await control.execute(sid, 'None', 120_000)).done?.success !== true)
        throw new Error(`no kernel for ${file}`);
      return { path: file, sid };
    };
    // One at a time, as each open shows an editor, and only those the sections asked for need;
    // the large notebook is opened only by its section, last.
    const unused = { path: '', sid: '' };
    const openIf = (wanted: boolean, file: string) => (wanted ? open(path.join(ws.dir, file), 'builtin') : unused);
    const agentsWanted = SECTIONS.some(
      (s) => !['runall', 'edits', 'stale', 'activation', 'presence', 'runfiles'].includes(s) && opts.wants(s),
    );
    const notebooks = {
      agents: [] as sections.Opened[],
      ipython: await openIf(opts.wants('modes'), 'ipython/ipython.ipynb'),
      cells: await openIf(opts.wants('cells') || opts.wants('listing'), 'cells.ipynb'),
      // Run All's own: the cells section leaves its notebook with runs the editor may still show.
      runall: await openIf(opts.wants('runall'), 'runall.ipynb'),
      stall: await openIf(opts.wants('stall'), 'stall.ipynb'),
    };
    for (let k = 1; k <= (agentsWanted ? 8 : 0); k++)
      notebooks.agents.push(await open(path.join(ws.dir, `agent-${k}.ipynb`), 'builtin'));
    if (agentsWanted) await open(notebooks.agents[0]!.path, 'builtin'); // a small notebook in front while timing

    // The installed extension's own files, which may come from another build than this tree (--vsix).
    const ext = sandbox.dirs.extensions;
    const installed = path.join(ext, fs.readdirSync(ext).find((n) => n.startsWith('agent-bridge.')) ?? '', 'dist');
    const kernelPy = path.join(installed, 'kernel.py');
    const kernels = {
      plain: new KernelProcess({ python: ws.plainPython, script: kernelPy, cwd: ws.dir }),
      ipython: new KernelProcess({ python: SYSTEM_PYTHON, script: kernelPy, cwd: ws.dir }),
    };
    for (const kernel of Object.values(kernels)) stops.push(() => kernel.dispose());
    await Promise.all([kernels.plain.start(), kernels.ipython.start()]);
    const floor = await startFloor(ws.plainPython, kernelPy, REPO_ROOT);
    stops.push(() => floor.stop());
    const ctx: sections.Ctx = {
      url: advert.url,
      token: advert.token,
      pid: advert.pid,
      floorUrl: floor.url,
      expressFloorUrl: floor.expressUrl,
      floorPid: floor.pid,
      kernels,
      notebooks,
      open: (file, kernel) => open(file, kernel),
      listFile: path.join(ws.dir, 'list-1000.ipynb'),
      page: sandbox.page,
      sandboxId: sandbox.id,
      plainPython: ws.plainPython,
      spansFile,
      jupyter:
        jupyter && 'extension' in jupyter
          ? {
              file: path.join(ws.dir, 'jupyter.ipynb'),
              runAllFile: path.join(ws.dir, 'runall-jupyter.ipynb'),
              // As the person would: pick the notebook's kernelspec in the list Jupyter shows when the
              // bridge starts a kernel, then allow our use of its kernels when VS Code asks (once).
              pick: () =>
                sandbox!.page
                  .locator('.quick-input-widget .monaco-list-row', { hasText: 'Python 3 (ipykernel)' })
                  .first()
                  .click({ timeout: 90_000 }),
              allow: () =>
                sandbox!.page
                  .locator('.monaco-dialog-box .monaco-button', { hasText: /^Allow$/ })
                  .first()
                  .click({ timeout: 90_000 }),
            }
          : { missing: jupyter?.skip ?? '' },
      rows,
      problems,
      say,
    };
    const q = await waitForQuiet(0.1, 30_000);
    say(
      `machine ${q.quiet ? 'quiet' : 'still busy'} (${(q.busy * 100).toFixed(0)}% of the CPUs) after ${(q.waitedMs / 1000).toFixed(1)} s`,
    );
    if (!q.quiet) problems.push(`the machine stayed ${(q.busy * 100).toFixed(0)}% busy: timings are noisy`);
    if (opts.wants('scratchpad')) await sections.scratchpad(ctx);
    if (opts.wants('scratchpad')) await sections.bigPrint(ctx);
    if (opts.wants('modes')) await sections.kernelModes(ctx);
    if (opts.wants('cells')) await sections.cellRuns(ctx);
    if (opts.wants('runall')) await runAllSideBySide(ctx);
    if (opts.wants('edits')) await insertVsEdit(ctx);
    if (opts.wants('agents')) await sections.agents(ctx);
    if (opts.wants('flood')) await flood(ctx);
    if (opts.wants('stall')) await sections.stalledReader(ctx);
    if (opts.wants('batch')) await sections.largestBatch(ctx);
    if (opts.wants('listing')) await sections.listing(ctx);
    if (opts.wants('presence')) rows.push(...(await presenceCost(say)));
    if (opts.wants('stale')) await staleAnalysis(ctx, path.join(installed, 'kernel_inspect.py'));
    if (opts.wants('runfiles')) await runFilesCost(ctx, ws.dir, sandbox.dirs.userData);
    if (jupyter && opts.wants('jupyter')) await sections.jupyterKernel(ctx);
    if (opts.wants('memory')) await batchMemory(ctx); // last: it leaves a 7,001-cell notebook open
    if (opts.wants('activation')) rows.push(...activationRows(sandbox, advert, installed, opts.vsix));
  } catch (err) {
    exitCode = 1;
    problems.push(`run broke: ${errorMessage(err)}`);
    if (sandbox) process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
  } finally {
    for (const stop of stops) await stop();
    await sandbox?.stop();
    fs.rmSync(ws.dir, { recursive: true, force: true });
  }

  console.log(`\n${renderTable(rows)}`);
  const load = os.loadavg().map((x) => x.toFixed(2));
  const file = writeResults(path.join(REPO_ROOT, 'bench-results'), startedAt, {
    durationS: (Date.now() - t0) / 1000,
    commit: spawnSync('git', ['describe', '--always', '--dirty'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout.trim(),
    machine: { cpus: os.cpus().length, node: process.version, loadavgEnd: load, otherSandboxes: others },
    rows,
    problems,
  });
  console.log(
    `\nresults: ${path.relative(process.cwd(), file)} (${((Date.now() - t0) / 1000).toFixed(0)} s; load ${load.join(' ')})`,
  );
  if (problems.length) console.log(`problems:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
