/**
 * Run All over the same 100 trivial cells, three ways, interleaved round by round:
 * (a) the person's Run All, clicked in the bench sandbox's workbench (our extension, its builtin
 *     kernel, our cell marks, views and listeners);
 * (b) the same click in a second sandbox WITHOUT our extension, whose only kernel is a FAKE
 *     minimal controller (test/fixtures/fake-python-kernel) running the cells in a Python process;
 * (c) an agent's run-all through the bridge (POST /notebooks/run), then the file saved and every
 *     cell's execution count read back from it.
 * When the Jupyter extension is given, (a) and (c) again on a notebook of its own whose kernel is
 * ipykernel through the Jupyter extension.
 * (a) and (b) are timed as the person sees them: from the click to the toolbar's Interrupt giving
 * way to Run All again (VS Code shows Interrupt while any cell of the notebook is queued or running).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { errorMessage } from '../../src/core/errorMessage';
import { sleep } from '../../src/core/sleep';
import { packFixture } from '../../sandbox-test/extensions';
import { launchSandbox, readRecord, REPO_ROOT, sandboxProcesses, type Sandbox } from '../../sandbox-test/vscode';
import { BenchClient } from './client';
import { cpuByRole, type CpuByRole } from './machine';
import { writeNotebook } from './notebooks';
import { base, goal, p50, row } from './report';
import { startJupyter, type Ctx, type Opened } from './sections';

const CELLS = 100;
const WARMUP_ROUNDS = 1;
const ROUNDS = 5;
const RUN_ALL_TIMEOUT_MS = 180_000;
const FAKE_KERNEL_DIR = path.join(REPO_ROOT, 'test', 'fixtures', 'fake-python-kernel');
const TOOLBAR = '.notebook-toolbar-container';

/** A failure of a click, with a screenshot of the page kept beside the results. */
async function failedClick(page: Page, shots: string, what: string, error: unknown): Promise<never> {
  const file = path.join(shots, `run-all-${Date.now()}.png`);
  await page.screenshot({ path: file }).catch(() => undefined);
  throw new Error(`${what} (screenshot ${file}): ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
}

/** Where the shown notebook's Run All button is, once the notebook shows no run under way. */
async function runAllButton(page: Page, shots: string): Promise<{ x: number; y: number }> {
  const button = page.locator(`${TOOLBAR} .action-label[aria-label^="Run All"]:visible`).first();
  // The editor idle first: a run it still shows (the agent's, answered ahead of it) would be Interrupt's.
  await page
    .waitForFunction(
      `![...document.querySelectorAll('${TOOLBAR} .action-label[aria-label^="Interrupt"]')].some(${ON_TOP})`,
      undefined,
      { polling: 25, timeout: RUN_ALL_TIMEOUT_MS },
    )
    .catch((e: unknown) => failedClick(page, shots, 'the notebook never showed idle', e));
  await button
    .waitFor({ state: 'visible', timeout: 60_000 })
    .catch((e: unknown) => failedClick(page, shots, 'no Run All button', e));
  // The editor brought to front may still be laying out: its button gets a box a moment later.
  let box = await button.boundingBox();
  for (let i = 0; !box && i < 50; i++) box = await sleep(100).then(() => button.boundingBox());
  if (!box) return failedClick(page, shots, 'the Run All button has no box', undefined);
  return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
}

/**
 * The person's click on the shown notebook's Run All; resolves with ms from the click to the
 * run's end as the person sees it: the toolbar's Interrupt giving way to Run All again, or, when
 * the run went by without the toolbar showing Interrupt, the last cell showing its new count and
 * success. Timed in the page.
 */
export async function clickRunAll(page: Page, shots: string, cells = CELLS): Promise<number> {
  const failed = (what: string, error: unknown) => failedClick(page, shots, what, error);
  const at = await runAllButton(page, shots);
  // Scrolled to the end, as a person watching the run finish would: the last cell is drawn.
  await page.mouse.move(at.x, at.y + 200);
  const drawn = () => page.evaluate(`(${lastCell(cells)})() !== null`);
  for (let i = 0; i < 200 && !(await drawn()); i++) {
    await page.mouse.wheel(0, 2_000);
    await sleep(30);
  }
  if (!(await drawn())) return failed('the last cell was not drawn after scrolling to the end', undefined);
  // The clock runs in the page: from the click's mousedown to the end, seen by an observer of the
  // whole editor area (a quick run can show Interrupt for less than any polling interval, and a
  // notebook just brought to the front may draw its toolbar anew).
  await page.evaluate(`(() => {
    const sel = '${TOOLBAR} .action-label[aria-label^="Interrupt"]';
    const shown = () => [...document.querySelectorAll(sel)].some(${ON_TOP});
    const lastCount = () => (${lastCell(cells)})() ?? { count: '', success: false };
    const before = lastCount().count;
    const run = (window.__benchRun = { clickAt: 0, seen: false, endedAt: 0 });
    document.addEventListener('mousedown', () => (run.clickAt = performance.now()), { capture: true, once: true });
    const observer = new MutationObserver(() => {
      if (!run.clickAt) return;
      const last = lastCount();
      const lastRan = last.count !== before && last.success;
      if (shown()) run.seen = true;
      else if ((run.seen || lastRan) && !run.endedAt) {
        run.seen = true;
        run.endedAt = performance.now();
        observer.disconnect();
      }
    });
    observer.observe(document.querySelector('.part.editor') ?? document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  })()`);
  await page.mouse.click(at.x, at.y);
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
 * The person's click on the shown notebook's Run All, its end read through the bridge: once the
 * document shows the last cell queued (Run All queues every cell at once), a wait on that cell's
 * run (POST /notebooks/cells/:id/wait) answers when the document shows its end. For the Jupyter
 * path, where the page showed neither Interrupt nor the last cell's end reliably (the editor
 * scrolls to the running cell), and whose agent's run-all is answered from the same document.
 */
async function clickRunAllFollowed(page: Page, shots: string, client: BenchClient, nb: Opened): Promise<number> {
  const q = `?notebook=${encodeURIComponent(nb.sid)}`;
  const cells = (JSON.parse((await client.request('GET', `/notebooks/cells${q}`)).text) as { cells: { id: string }[] }).cells;
  const last = encodeURIComponent(cells.at(-1)!.id);
  const lastRun = async () =>
    (JSON.parse((await client.request('GET', `/notebooks/cells/${last}${q}&outputs=none`)).text) as { cell: ListedCell }).cell
      .execution;
  const before = (await lastRun())?.order;
  const at = await runAllButton(page, shots);
  const start = performance.now();
  await page.mouse.click(at.x, at.y);
  for (;;) {
    const run = await lastRun();
    if (run?.status === 'queued' || run?.status === 'running' || run?.order !== before) break;
    if (performance.now() - start > 30_000) return failedClick(page, shots, 'Run All was clicked, but no run started', undefined);
    await sleep(25);
  }
  const ended = await client.request(
    'POST',
    `/notebooks/cells/${last}/wait`,
    { notebook: nb.sid, timeoutMs: RUN_ALL_TIMEOUT_MS },
    RUN_ALL_TIMEOUT_MS + 10_000,
  );
  if (ended.status !== 200)
    return failedClick(page, shots, `the run never ended: ${ended.status} ${ended.text.slice(0, 200)}`, undefined);
  return performance.now() - start;
}

/**
 * Page text: whether an element is on screen and on top (background tabs keep their notebook's
 * rows and toolbar drawn, under the one in front).
 */
const ON_TOP = `(e) => {
  const box = e.getBoundingClientRect();
  if (!box.width || !box.height || box.bottom <= 0 || box.top >= innerHeight) return false;
  const hit = document.elementFromPoint(box.left + box.width / 2, Math.max(1, Math.min(innerHeight - 1, box.top + box.height / 2)));
  return Boolean(hit && (e === hit || e.contains(hit)));
}`;

/**
 * A function, as page text, of the shown notebook's last cell row (index `cells - 1`): its count
 * label and whether it shows success; null while that row is not on screen.
 */
const lastCell = (cells: number) => `() => {
  const onTop = ${ON_TOP};
  const last = [...document.querySelectorAll('.monaco-list-row[data-index="${cells - 1}"][aria-setsize="${cells}"]')].find(onTop);
  if (!last) return null;
  return {
    count: last.querySelector('.execution-count-label')?.textContent ?? '',
    success: Boolean(last.querySelector('.codicon-notebook-state-success')),
  };
}`;

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
  const jupyter = 'missing' in ctx.jupyter ? { na: ctx.jupyter.missing } : await startJupyter(ctx, ctx.jupyter.runAllFile);
  const bare = await bareSandbox(ctx.say, ctx.plainPython);
  // Screenshots of a click that did not run, kept beside the results.
  const shots = path.join(REPO_ROOT, 'bench-results');
  fs.mkdirSync(shots, { recursive: true });
  const cpu = {
    a: { extensionHost: 0, renderer: 0, kernel: 0, other: 0 },
    b: { extensionHost: 0, renderer: 0, kernel: 0, other: 0 },
  };
  const times = {
    a: [] as number[],
    b: [] as number[],
    c: [] as number[],
    d: [] as number[],
    aj: [] as number[],
    cj: [] as number[],
  };
  /** Per run-all, each round's saved counts: a number, or the save's refusal. */
  const saved = { stop: [] as (number | string)[], continue: [] as (number | string)[], jupyter: [] as (number | string)[] };
  /** The agent's run-all, then the file saved and its counts read back. */
  const agentRunAll = async (on: Opened, onError: 'stop' | 'continue', counts: (number | string)[]) => {
    const start = performance.now();
    const r = await client.request(
      'POST',
      '/notebooks/run',
      { notebook: on.sid, all: true, wait: true, onError },
      RUN_ALL_TIMEOUT_MS,
    );
    const ms = performance.now() - start;
    if (r.status !== 200 || (JSON.parse(r.text) as { status?: string }).status !== 'succeeded')
      ctx.problems.push(`(c) agent run-all: ${r.status} ${r.text.slice(0, 200)}`);
    const s = await client.request('POST', '/notebooks/save', { notebook: on.sid }, 60_000);
    if (s.status !== 200) ctx.problems.push(`(c) save: ${s.status} ${s.text.slice(0, 300)}`);
    counts.push(s.status === 200 ? savedCounts(on.path) : `save ${s.status}`);
    return ms;
  };
  /** The person's Run All clicked on `on`, in front (the sandbox's CPU meanwhile added to `into`); then every cell checked. */
  const clicked = async (on: Opened, what: string, into: CpuByRole, click: () => Promise<number>) => {
    await ctx.open(on.path); // in front, as the person has it
    const ms = await withCpu(ctx.sandboxId, into, click);
    const wrong = await allRan(client, on);
    if (wrong) ctx.problems.push(`${what}: ${wrong}`);
    return ms;
  };
  /** Sides that failed, with why: they run no more rounds, and their rows read n/a. */
  const broken: Partial<Record<keyof typeof times, string>> = {};
  try {
    const steps = {
      a: () => clicked(nb, '(a) Run All', cpu.a, () => clickRunAll(ctx.page, shots)),
      b: async () => {
        const from = fs.statSync(bare.log).size;
        const ms = await withCpu(bare.sandbox.id, cpu.b, () => clickRunAll(bare.sandbox.page, shots));
        const runs = fakeRuns(bare.log, from);
        if (runs.ok !== CELLS || runs.failed)
          ctx.problems.push(`(b) Run All without our extension: ${runs.ok} ok, ${runs.failed} failed`);
        return ms;
      },
      c: () => agentRunAll(nb, 'stop', saved.stop),
      d: () => agentRunAll(nb, 'continue', saved.continue),
      ...('na' in jupyter
        ? {}
        : {
            aj: () =>
              clicked(jupyter, '(a) Run All on Jupyter', { extensionHost: 0, renderer: 0, kernel: 0, other: 0 }, () =>
                clickRunAllFollowed(ctx.page, shots, client, jupyter),
              ),
            cj: () => agentRunAll(jupyter, 'stop', saved.jupyter),
          }),
    };
    const order = Object.keys(steps) as (keyof typeof times)[];
    for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
      for (let k = 0; k < order.length; k++) {
        const side = order[(round + k) % order.length]!;
        if (broken[side]) continue;
        // One side failing (a click the workbench missed) leaves the others' figures standing.
        const ms = await steps[side]!().catch((e: unknown) => {
          broken[side] = errorMessage(e).slice(0, 300);
          ctx.problems.push(`run-all (${side}) stopped: ${broken[side]}`);
          return NaN;
        });
        if (round >= WARMUP_ROUNDS && !broken[side]) times[side].push(ms);
      }
    }
  } finally {
    await client.close();
    await bare.sandbox.stop();
    fs.rmSync(bare.dir, { recursive: true, force: true });
  }
  const [a, b, c, d, aj, cj] = [times.a, times.b, times.c, times.d, times.aj, times.cj].map(p50) as number[];
  /** A row's n/a when its side stopped; a target only where its figures exist. */
  const na = (...sides: (keyof typeof times)[]) => {
    const why = sides.map((side) => broken[side]).find(Boolean);
    return why ? { na: `stopped: ${why}` } : {};
  };
  const aim = (text: string, met: boolean, ...values: number[]) => (values.every(Number.isFinite) ? goal(text, met) : undefined);
  const section = 'run-all';
  const counts = [...saved.stop, ...saved.continue, ...saved.jupyter];
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
      target: aim('(a) ≤ 1.1× (b)', a <= 1.1 * b, a, b),
      note: `rounds ${each(times.a)} ms; (b) ${each(times.b)} ms; load average ${load}`,
      ...na('a'),
    }),
    row(section, `(b) Run All clicked without our extension (fake minimal kernel), p50`, b, 'ms', na('b')),
    ...cpuRows,
    row(section, `(c) an agent's run-all over HTTP (onError "stop"), p50`, c, 'ms', {
      baseline: base('(a) Run All clicked', a),
      target: aim('(c) ≤ 1.5× (a)', c <= 1.5 * a, a, c),
      note: `rounds ${each(times.c)} ms`,
      ...na('c'),
    }),
    row(section, `(c) the same with onError "continue" (what Run All does on a failure), p50`, d, 'ms', {
      baseline: base('(a) Run All clicked', a),
      note: `rounds ${each(times.d)} ms`,
      ...na('d'),
    }),
    row(section, `(c) execution counts saved in the file (fewest of any saved round)`, fewest, 'count', {
      target: goal(`${CELLS} of ${CELLS}, every round`, fewest === CELLS && counts.every((n) => n === CELLS)),
      note: `each round, onError "stop": ${saved.stop.join(', ')}; "continue": ${saved.continue.join(', ')}; on Jupyter: ${saved.jupyter.join(', ') || '-'}`,
    }),
    ...('na' in jupyter
      ? [row(section, `(a) and (c) on a Jupyter kernel`, NaN, 'ms', { na: jupyter.na })]
      : [
          row(
            section,
            `(a) Run All clicked on a Jupyter kernel (ipykernel via the Jupyter extension), to the document showing its end, p50`,
            aj!,
            'ms',
            { note: `rounds ${each(times.aj)} ms`, ...na('aj') },
          ),
          row(section, `(c) an agent's run-all on that Jupyter kernel (onError "stop"), p50`, cj!, 'ms', {
            baseline: base('(a) on Jupyter', aj!),
            target: aim('≤ 1.5× (a) on Jupyter', cj! <= 1.5 * aj!, aj!, cj!),
            note: `rounds ${each(times.cj)} ms`,
            ...na('cj'),
          }),
        ]),
  );
}
