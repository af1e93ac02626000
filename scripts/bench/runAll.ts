/**
 * Run All over the same 100 trivial cells, three ways, interleaved round by round:
 * (a) the person's Run All, clicked in the bench sandbox's workbench (our extension, its builtin
 *     kernel, our cell marks, views and listeners);
 * (b) the same click in a second sandbox WITHOUT our extension, whose only kernel is a FAKE
 *     minimal controller (test/fixtures/fake-python-kernel) running the cells in a Python process;
 * (c) an agent's run-all through the bridge (POST /notebooks/run), then the file saved and every
 *     cell's execution count read back from it.
 * (a) and (b) are timed as the person sees them: from the click to the toolbar's Interrupt giving
 * way to Run All again (VS Code shows Interrupt while any cell of the notebook is queued or running).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { sleep } from '../../src/core/sleep';
import { packFixture } from '../../sandbox-test/extensions';
import { launchSandbox, readRecord, REPO_ROOT, sandboxProcesses, type Sandbox } from '../../sandbox-test/vscode';
import { BenchClient } from './client';
import { cpuByRole, type CpuByRole } from './machine';
import { writeNotebook } from './notebooks';
import { base, goal, p50, row } from './report';
import type { Ctx, Opened } from './sections';

const CELLS = 100;
const WARMUP_ROUNDS = 1;
const ROUNDS = 5;
const RUN_ALL_TIMEOUT_MS = 180_000;
const FAKE_KERNEL_DIR = path.join(REPO_ROOT, 'test', 'fixtures', 'fake-python-kernel');
const TOOLBAR = '.notebook-toolbar-container';

/** The person's click on the visible notebook's Run All; resolves with ms from the click to Interrupt gone. */
export async function clickRunAll(page: Page, shots: string): Promise<number> {
  const button = page.locator(`${TOOLBAR} .action-label[aria-label^="Run All"]:visible`).first();
  // Evaluated in the page (as text: the bench is not compiled against the DOM's types).
  const interrupting = (shown: boolean, timeout: number) =>
    page.waitForFunction(
      `[...document.querySelectorAll('${TOOLBAR} .action-label[aria-label^="Interrupt"]')]` +
        `.some((e) => e.getClientRects().length > 0) === ${shown}`,
      undefined,
      { polling: 25, timeout },
    );
  const failed = async (what: string, error: unknown) => {
    const file = path.join(shots, `run-all-${Date.now()}.png`);
    await page.screenshot({ path: file }).catch(() => undefined);
    throw new Error(`${what} (screenshot ${file}): ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
  };
  // The editor idle first: a run it still shows (the agent's, answered ahead of it) would be Interrupt's.
  await interrupting(false, RUN_ALL_TIMEOUT_MS).catch((e: unknown) => failed('the notebook never showed idle', e));
  await button.waitFor({ state: 'visible', timeout: 60_000 }).catch((e: unknown) => failed('no Run All button', e));
  // The editor brought to front may still be laying out: its button gets a box a moment later.
  let box = await button.boundingBox();
  for (let i = 0; !box && i < 50; i++) box = await sleep(100).then(() => button.boundingBox());
  if (!box) return failed('the Run All button has no box', undefined);
  // The clock runs in the page: from the click's mousedown to Interrupt gone, seen by an observer
  // of the toolbars (a quick run can show Interrupt for less than any polling interval).
  await page.evaluate(`(() => {
    const sel = '${TOOLBAR} .action-label[aria-label^="Interrupt"]';
    const shown = () => [...document.querySelectorAll(sel)].some((e) => e.getClientRects().length > 0);
    const run = (window.__benchRun = { clickAt: 0, seen: false, endedAt: 0 });
    document.addEventListener('mousedown', () => (run.clickAt = performance.now()), { capture: true, once: true });
    const observer = new MutationObserver(() => {
      if (shown()) run.seen = true;
      else if (run.seen && !run.endedAt) {
        run.endedAt = performance.now();
        observer.disconnect();
      }
    });
    for (const t of document.querySelectorAll('${TOOLBAR}')) observer.observe(t, { subtree: true, childList: true, attributes: true });
  })()`);
  await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await page
    .waitForFunction('window.__benchRun.seen', undefined, { polling: 100, timeout: 30_000 })
    .catch((e: unknown) => failed('Run All was clicked, but no run started', e));
  const ms = await page
    .waitForFunction('window.__benchRun.endedAt && window.__benchRun.endedAt - window.__benchRun.clickAt', undefined, {
      polling: 100,
      timeout: RUN_ALL_TIMEOUT_MS,
    })
    .catch((e: unknown) => failed('the run never ended', e));
  return Number(await ms.jsonValue());
}

/**
 * The second sandbox: VS Code without our extension, the fake kernel selected on its own copy of
 * the notebook; `more` adds other extensions and settings (the peers bench's memory baseline).
 */
export async function bareSandbox(
  say: (message: string) => void,
  python: string,
  more: { otherVsix?: readonly string[]; settings?: Record<string, unknown>; env?: Record<string, string> } = {},
): Promise<{ sandbox: Sandbox; log: string; dir: string }> {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-bench-bare-')));
  const file = path.join(dir, 'cells.ipynb');
  writeNotebook(file, CELLS, true);
  const log = path.join(dir, 'fake-kernel.log');
  const sandbox = await launchSandbox({
    workspace: dir,
    kind: 'bench-bare',
    otherVsix: [...(more.otherVsix ?? []), packFixture(FAKE_KERNEL_DIR, dir, 'fake-python-kernel')],
    settings: more.settings,
    env: { ...more.env, FAKE_KERNEL_PYTHON: python, FAKE_KERNEL_OPEN: file, FAKE_KERNEL_LOG: log },
    onProgress: (m) => say(`without our extension: ${m}`),
  });
  const line = await sandbox.waitFor(
    'the fake kernel to open the notebook and be selected',
    () => fs.existsSync(log) && /^(ready|failed.*)$/m.exec(fs.readFileSync(log, 'utf8'))?.[0],
    120_000,
  );
  if (line !== 'ready') throw new Error(`fake kernel: ${line}`);
  return { sandbox, log, dir };
}

/** CPU ms so far of a sandbox's processes, by role. */
function sandboxCpu(id: string): CpuByRole {
  const record = readRecord(id);
  return cpuByRole(record ? sandboxProcesses(record) : []);
}

/** Runs `step`, adding the CPU the sandbox's processes spent meanwhile to `into`, by role. */
async function withCpu(id: string, into: CpuByRole, step: () => Promise<number>): Promise<number> {
  const before = sandboxCpu(id);
  const ms = await step();
  const after = sandboxCpu(id);
  for (const role of Object.keys(into) as (keyof CpuByRole)[]) into[role] += after[role] - before[role];
  return ms;
}

/** The fake kernel's log lines since `from` bytes: how many cells ended ok. */
function fakeRuns(log: string, from: number): { ok: number; failed: number; size: number } {
  const text = fs.readFileSync(log, 'utf8');
  const lines = text.slice(from).split('\n');
  return {
    ok: lines.filter((l) => / ok \d+$/.test(l)).length,
    failed: lines.filter((l) => / failed /.test(l)).length,
    size: text.length,
  };
}

interface ListedCell {
  execution?: { order: number | null; success: boolean | null; status: string };
}

/** Every cell of the notebook ran and succeeded, each with its own count, as the bridge reads the document. */
async function allRan(client: BenchClient, nb: Opened): Promise<string | undefined> {
  const r = await client.request('GET', `/notebooks/cells?notebook=${encodeURIComponent(nb.sid)}`);
  const cells = (JSON.parse(r.text) as { cells: ListedCell[] }).cells;
  const ok = cells.filter((c) => c.execution?.success === true && c.execution.status === 'succeeded');
  const counts = new Set(cells.map((c) => c.execution?.order));
  if (ok.length === cells.length && counts.size === cells.length) return undefined;
  const odd = cells.find((c) => !ok.includes(c));
  return `${ok.length} of ${cells.length} cells ran ok, ${counts.size} distinct counts; the first other: ${JSON.stringify(odd?.execution)}`;
}

/** The execution counts the file on disk holds. */
function savedCounts(file: string): number {
  const nb = JSON.parse(fs.readFileSync(file, 'utf8')) as { cells: { execution_count?: number | null }[] };
  return nb.cells.filter((c) => typeof c.execution_count === 'number').length;
}

export async function runAllSideBySide(ctx: Ctx): Promise<void> {
  ctx.say(
    `run-all: ${WARMUP_ROUNDS} + ${ROUNDS} rounds of (a) Run All clicked, (b) the same without our extension, (c) an agent's run-all`,
  );
  const nb = ctx.notebooks.runall;
  const client = new BenchClient(ctx.url, ctx.token);
  const bare = await bareSandbox(ctx.say, ctx.plainPython);
  // Screenshots of a click that did not run, kept beside the results.
  const shots = path.join(REPO_ROOT, 'bench-results');
  fs.mkdirSync(shots, { recursive: true });
  const cpu = {
    a: { extensionHost: 0, renderer: 0, kernel: 0, other: 0 },
    b: { extensionHost: 0, renderer: 0, kernel: 0, other: 0 },
  };
  const times = { a: [] as number[], b: [] as number[], c: [] as number[], d: [] as number[] };
  /** Per onError, each round's saved counts: a number, or the save's refusal. */
  const saved = { stop: [] as (number | string)[], continue: [] as (number | string)[] };
  /** The agent's run-all, then the file saved and its counts read back. */
  const agentRunAll = async (onError: 'stop' | 'continue') => {
    const start = performance.now();
    const r = await client.request(
      'POST',
      '/notebooks/run',
      { notebook: nb.sid, all: true, wait: true, onError },
      RUN_ALL_TIMEOUT_MS,
    );
    const ms = performance.now() - start;
    if (r.status !== 200 || (JSON.parse(r.text) as { status?: string }).status !== 'succeeded')
      ctx.problems.push(`(c) agent run-all: ${r.status} ${r.text.slice(0, 200)}`);
    const s = await client.request('POST', '/notebooks/save', { notebook: nb.sid }, 60_000);
    if (s.status !== 200) ctx.problems.push(`(c) save: ${s.status} ${s.text.slice(0, 300)}`);
    saved[onError].push(s.status === 200 ? savedCounts(nb.path) : `save ${s.status}`);
    return ms;
  };
  try {
    const steps = {
      a: async () => {
        await ctx.open(nb.path); // in front, as the person has it
        const ms = await withCpu(ctx.sandboxId, cpu.a, () => clickRunAll(ctx.page, shots));
        const wrong = await allRan(client, nb);
        if (wrong) ctx.problems.push(`(a) Run All: ${wrong}`);
        return ms;
      },
      b: async () => {
        const from = fs.statSync(bare.log).size;
        const ms = await withCpu(bare.sandbox.id, cpu.b, () => clickRunAll(bare.sandbox.page, shots));
        const runs = fakeRuns(bare.log, from);
        if (runs.ok !== CELLS || runs.failed)
          ctx.problems.push(`(b) Run All without our extension: ${runs.ok} ok, ${runs.failed} failed`);
        return ms;
      },
      c: () => agentRunAll('stop'),
      d: () => agentRunAll('continue'),
    };
    const order = ['b', 'a', 'c', 'd'] as const;
    for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
      for (let k = 0; k < order.length; k++) {
        const side = order[(round + k) % order.length]!;
        const ms = await steps[side]();
        if (round >= WARMUP_ROUNDS) times[side].push(ms);
      }
    }
  } finally {
    await client.close();
    await bare.sandbox.stop();
    fs.rmSync(bare.dir, { recursive: true, force: true });
  }
  const [a, b, c, d] = [p50(times.a), p50(times.b), p50(times.c), p50(times.d)];
  const section = 'run-all';
  const counts = [...saved.stop, ...saved.continue];
  const fewest = Math.min(...counts.filter((n) => typeof n === 'number'));
  const load = os.loadavg()[0]!.toFixed(2);
  const each = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ');
  // CPU per Run All, by process: where (a) spends what (b) does not (wall times on a shared
  // machine swing by 2× from round to round; CPU time swings far less).
  const rounds = WARMUP_ROUNDS + ROUNDS;
  const total = (c: CpuByRole) => Object.values(c).reduce((x, y) => x + y, 0) / rounds;
  const cpuRows = [
    row(section, '(a) CPU per Run All, every process of the sandbox', total(cpu.a), 'ms', {
      baseline: base('(b)', total(cpu.b)),
    }),
    ...(Object.keys(cpu.a) as (keyof CpuByRole)[]).map((role) =>
      row(section, `  of it: ${role}`, cpu.a[role] / rounds, 'ms', { baseline: base('(b)', cpu.b[role] / rounds) }),
    ),
  ];
  ctx.rows.push(
    row(section, `(a) Run All clicked, ${CELLS} trivial cells, p50`, a, 'ms', {
      baseline: base('(b) without our extension', b),
      target: goal('(a) ≤ 1.1× (b)', a <= 1.1 * b),
      note: `rounds ${each(times.a)} ms; (b) ${each(times.b)} ms; load average ${load}`,
    }),
    row(section, `(b) Run All clicked without our extension (fake minimal kernel), p50`, b, 'ms'),
    ...cpuRows,
    row(section, `(c) an agent's run-all over HTTP, p50`, c, 'ms', {
      baseline: base('(a) Run All clicked', a),
      target: goal('(c) ≤ 1.1× (a)', c <= 1.1 * a),
      note: `rounds ${each(times.c)} ms`,
    }),
    row(section, `(c) the same with onError "continue" (what Run All does on a failure), p50`, d, 'ms', {
      baseline: base('(a) Run All clicked', a),
      note: `rounds ${each(times.d)} ms`,
    }),
    row(section, `(c) execution counts saved in the file (fewest of any saved round)`, fewest, 'count', {
      target: goal(`${CELLS} of ${CELLS}, every round`, fewest === CELLS && counts.every((n) => n === CELLS)),
      note: `each round, onError "stop": ${saved.stop.join(', ')}; "continue": ${saved.continue.join(', ')}`,
    }),
  );
}
