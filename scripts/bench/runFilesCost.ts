/**
 * What recording a run's files costs (agentBridge.runs.recordFiles), in a workspace holding a
 * node_modules-like tree of 20,000 files under a folder the walk does not leave out
 * (`packages/`, the worst case: under `node_modules` it would not be walked at all). Recording
 * on and off alternate in blocks (off, on, off, on), the setting changed in the Settings editor as
 * the person would: print(1) back to back (walks wait for runs to pause), print(1) each with a
 * walk under way (the previous run's files asked for at the same moment: the worst case), the
 * walk as `GET /notebooks/runs/:id/files` sees it, and GET /health probed during walks. Then the
 * same walk in this process, with the event loop's gaps during it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { workspaceWalk } from '../../src/access/workspaceWalk';
import { sleep } from '../../src/core/sleep';
import { setBoolean } from '../../sandbox-test/settingsEditor';
import { BenchClient } from './client';
import { writeNotebook } from './notebooks';
import { base, goal, p50, percentile, row } from './report';
import { cpuPerRun, probeHealth, type Ctx } from './sections';

const PACKAGES = 400;
const FILES_PER_FOLDER = 25;
const FILES = PACKAGES * 2 * FILES_PER_FOLDER;
const BACK_TO_BACK = 60;
const WITH_WALK = 8;
const SETTING = 'agentBridge.runs.recordFiles';
const PROBE_MS = 3_000;
const CPU_WALKS = 10;

/** A tree shaped like node_modules: packages, each with two folders of small files. */
function makeTree(root: string): void {
  for (let p = 0; p < PACKAGES; p++)
    for (const folder of ['lib', 'dist']) {
      const dir = path.join(root, 'packages', `pkg-${p}`, folder);
      fs.mkdirSync(dir, { recursive: true });
      for (let f = 0; f < FILES_PER_FOLDER; f++) fs.writeFileSync(path.join(dir, `m${f}.js`), `module.exports = ${f};\n`);
    }
}

/** The gaps between 1 ms ticks of the event loop while `work` runs (a block shows as a long gap), and how long it took. */
async function loopGaps(work: () => Promise<unknown>): Promise<{ ms: number; gaps: number[] }> {
  let last = performance.now();
  const gaps: number[] = [];
  const tick = setInterval(() => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }, 1);
  const start = performance.now();
  await work();
  const ms = performance.now() - start;
  clearInterval(tick);
  gaps.push(performance.now() - last);
  return { ms, gaps };
}

export async function runFilesCost(ctx: Ctx, workspace: string, userData: string): Promise<void> {
  const tree = path.join(workspace, 'runfiles-bench');
  ctx.say(`run files: a tree of ${FILES.toLocaleString('en-US')} files; recording off and on in alternate blocks`);
  makeTree(tree);
  const notebook = path.join(workspace, 'runfiles.ipynb');
  writeNotebook(notebook, 3);
  const { sid } = await ctx.open(notebook, 'builtin');
  const agent = new BenchClient(ctx.url, ctx.token, 'bench-runfiles', true);
  const fail = (what: string) => ctx.problems.push(`run files: ${what}`);
  const print = async () => {
    const r = await agent.execute(sid, 'print(1)');
    if (r.error || r.stdout !== '1\n') fail(`print(1): ${r.error ?? r.stdout}`);
    return r.ms;
  };
  const newestRun = async () => {
    const r = await agent.request('GET', `/notebooks/runs?notebook=${encodeURIComponent(sid)}&limit=1`);
    return (JSON.parse(r.text) as { runs: { id: string }[] }).runs[0]?.id ?? '';
  };
  const filesOf = async (id: string) => {
    const r = await agent.request('GET', `/notebooks/runs/${id}/files`, undefined, 120_000);
    if (r.status !== 200) fail(`GET files: ${r.status} ${r.text.slice(0, 200)}`);
    return { ms: r.ms, answer: JSON.parse(r.text) as { files: unknown[]; complete: boolean; reason?: string } };
  };
  /** Sets the setting in the Settings editor as the person would, and waits until a run's record shows it. */
  const recording = async (on: boolean) => {
    await setBoolean(ctx.page, userData, SETTING, on, undefined, true);
    for (const until = Date.now() + 30_000; Date.now() < until; await sleep(200)) {
      await print();
      const { answer } = await filesOf(await newestRun());
      if (on !== /was off/.test(answer.reason ?? '')) return;
    }
    throw new Error(`${SETTING}: ${on} never took effect`);
  };

  const block = () => ({
    back: [] as number[],
    walking: [] as number[],
    files: [] as number[],
    health: [] as number[],
    cpu: [] as number[],
  });
  const samples = { on: block(), off: block() };
  const single: number[] = [];
  let seen = { listed: -1, complete: false, reason: '' };
  try {
    for (const on of [false, true, false, true]) {
      await recording(on);
      const s = samples[on ? 'on' : 'off'];
      for (let i = 0; i < BACK_TO_BACK; i++) s.back.push(await print());
      for (let i = 0; i < WITH_WALK; i++) {
        await print();
        // Its files not listed yet (the background walk waits for runs to pause): asked for, a walk starts now.
        const previous = await newestRun();
        const [ms, files] = await Promise.all([print(), filesOf(previous)]);
        s.walking.push(ms);
        s.files.push(files.ms);
        if (on) seen = { listed: files.answer.files.length, complete: files.answer.complete, reason: files.answer.reason ?? '' };
      }
      // GET /health every 10 ms for PROBE_MS, while the files of fresh runs are asked for one after another.
      const until = Date.now() + PROBE_MS;
      const probes = probeHealth(ctx, () => Date.now() < until);
      while (Date.now() < until) {
        await print();
        await filesOf(await newestRun());
      }
      s.health.push(...(await probes));
      // The extension host's CPU per run and its files asked for (a walk each, when on).
      s.cpu.push(
        await cpuPerRun(ctx.pid, CPU_WALKS, async () => {
          await print();
          return (await filesOf(await newestRun())).ms;
        }),
      );
    }
    const id = await newestRun();
    single.push((await agent.request('GET', `/notebooks/runs/${id}`)).ms);
  } finally {
    await agent.close();
  }

  // The same walk in this process, keeping what a run just made would (nothing: the tree is older):
  // the event loop's gaps, against an idle loop as long. The first walk (cold caches) is not counted.
  const walkAll = workspaceWalk(() => [workspace]);
  const walk = () => walkAll(Date.now());
  await walk();
  const walks: { ms: number; gaps: number[] }[] = [];
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < 5; i++) walks.push(await loopGaps(walk));
  const cpu = process.cpuUsage(cpuBefore);
  const cpuPerWalk = (cpu.user + cpu.system) / 1000 / walks.length;
  const idle = await loopGaps(() => sleep(p50(walks.map((w) => w.ms))));
  const gaps = walks.flatMap((w) => w.gaps);
  const counted = (await walkAll(0)).files.size;
  fs.rmSync(tree, { recursive: true, force: true });

  const { on, off } = samples;
  const longest = Math.max(...gaps);
  ctx.rows.push(
    row('runfiles', 'print(1) back to back, recording on, p50', p50(on.back), 'ms', {
      baseline: base('recording off', p50(off.back)),
      note: `${on.back.length} runs each way; walks wait for runs to pause (1 s), 10 s at most`,
    }),
    row('runfiles', 'print(1) with a walk of the workspace under way, p50', p50(on.walking), 'ms', {
      baseline: base('recording off', p50(off.walking)),
      note: `p95 ${percentile(on.walking, 95).toFixed(1)} ms vs ${percentile(off.walking, 95).toFixed(1)} ms; the previous run's files asked for at the same moment`,
    }),
    row('runfiles', `GET /notebooks/runs/:id/files, a walk of ${FILES.toLocaleString('en-US')} files, p50`, p50(on.files), 'ms', {
      baseline: base('recording off (no walk)', p50(off.files)),
      note: `the last answer: ${seen.listed} files listed, complete ${seen.complete}${seen.reason ? ` (${seen.reason})` : ''}; GET /notebooks/runs/:id ${single[0]?.toFixed(1)} ms`,
    }),
    row('runfiles', 'GET /health during walks (every 10 ms, open loop), p99', percentile(on.health, 99), 'ms', {
      baseline: base('recording off', percentile(off.health, 99)),
      note: `max ${Math.max(...on.health).toFixed(1)} ms vs ${Math.max(...off.health).toFixed(1)} ms, over ${on.health.length} and ${off.health.length} probes`,
    }),
    row(
      'runfiles',
      `event loop: longest gap between 1 ms ticks during a walk (this process, ${counted.toLocaleString('en-US')} files)`,
      longest,
      'ms',
      {
        baseline: base('idle loop as long', Math.max(...idle.gaps)),
        target: goal('≤ 10 ms', longest <= 10),
        note: `over 5 warm walks; p99 of the gaps ${percentile(gaps, 99).toFixed(1)} ms (idle ${percentile(idle.gaps, 99).toFixed(1)} ms); a busy process on a loaded machine also waits for a CPU, which shows as a gap`,
      },
    ),
    row('runfiles', 'extension host CPU per run and its files asked for (a walk), recording on', p50(on.cpu), 'ms', {
      baseline: base('recording off', p50(off.cpu)),
      note: `${CPU_WALKS} in a row, twice each way (p50 of ${on.cpu.map((c) => c.toFixed(0)).join(', ')} vs ${off.cpu.map((c) => c.toFixed(0)).join(', ')} ms); /proc's CPU times less the host's idle rate`,
    }),
    row('runfiles', 'a walk in this process: wall time, p50', p50(walks.map((w) => w.ms)), 'ms', {
      note: `CPU ${cpuPerWalk.toFixed(0)} ms per walk`,
    }),
  );
}
