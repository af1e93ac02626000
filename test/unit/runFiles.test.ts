import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentAction } from '../../src/core/agents/accessPolicy';
import { RunHistory, runIdOf } from '../../src/core/runs/runHistory';
import { WalkSchedule, filesOf, type WorkspaceSnapshot } from '../../src/core/runs/runFiles';
import { workspaceWalk } from '../../src/access/workspaceWalk';
import { sleep } from '../../src/core/sleep';

describe('the files a run created or changed (GET /notebooks/runs/:id/files)', function () {
  this.timeout(30_000);
  let root: string;
  let history: RunHistory;
  let on = true;
  let next = 1;
  const mine = { owner: 'owner-a' };

  /** An agent's scratchpad run through the history, as the gate drives it: `work` done, then ended. */
  const runOf = async (owner: string, work: () => void, outcome: 'succeeded' | 'refused' = 'succeeded') => {
    const action = {
      id: next++,
      startedAt: Date.now(),
      kind: 'execute',
      transport: 'http',
      label: 'scratchpad run',
      notebook: undefined,
      code: 'work()',
      client: 'agent #1',
      owner,
      summary: 'scratchpad run',
    } as unknown as AgentAction;
    await sleep(30);
    work();
    await sleep(30);
    history.ended(action, { outcome, durationMs: Date.now() - action.startedAt, detail: '', output: '', ran: 'work()' });
    return runIdOf(action);
  };
  const historyOver = (limits?: Parameters<typeof workspaceWalk>[1]) =>
    new RunHistory(
      { load: () => [], save: () => undefined },
      {
        schedule: new WalkSchedule(
          workspaceWalk(() => [root], limits),
          { quietMs: 0, latestMs: 0 },
        ),
        on: () => on,
      },
    );

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'run-files-'));
    for (const dir of ['data', 'node_modules', 'env', 'deep/er/still']) mkdirSync(join(root, dir), { recursive: true });
    writeFileSync(join(root, 'data', 'old.csv'), 'a\n');
    writeFileSync(join(root, 'data', 'kept.csv'), 'k\n');
    writeFileSync(join(root, 'env', 'pyvenv.cfg'), 'home = /usr/bin\n');
    on = true;
    history = historyOver();
    await sleep(30); // the files made above are older than any run
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('lists a file the run wrote and one it changed, not those it left alone or in left-out folders', async () => {
    const id = await runOf(mine.owner, () => {
      writeFileSync(join(root, 'data', 'out.csv'), 'x,y\n1,2\n');
      writeFileSync(join(root, 'data', 'old.csv'), 'a\nb\n');
      writeFileSync(join(root, 'deep', 'er', 'still', 'model.bin'), '0');
      writeFileSync(join(root, 'node_modules', 'cache.js'), '1');
      writeFileSync(join(root, 'env', 'site.py'), '1'); // a virtual environment, whatever its name
    });
    const { files, complete, reason } = await history.files(mine, id);
    assert.deepEqual([complete, reason], [true, undefined]);
    assert.deepEqual(files.map((f) => [f.path, f.change, f.bytes]).sort(), [
      [join(root, 'data', 'old.csv'), 'changed', 4],
      [join(root, 'data', 'out.csv'), 'created', 8],
      [join(root, 'deep', 'er', 'still', 'model.bin'), 'created', 1],
    ]);
  });

  it('finds a file copied in with its old times kept (by its creation time)', async () => {
    const id = await runOf(mine.owner, () => {
      writeFileSync(join(root, 'copied.csv'), 'c\n');
      utimesSync(join(root, 'copied.csv'), new Date('2020-01-01'), new Date('2020-01-01'));
    });
    const { files } = await history.files(mine, id);
    assert.deepEqual(
      files.map((f) => [f.path, f.change]),
      [[join(root, 'copied.csv'), 'created']],
    );
  });

  it('lists none for a run that wrote nothing, and does not give it the files of a run after it', async () => {
    const quiet = await runOf(mine.owner, () => undefined);
    const writer = await runOf(mine.owner, () => writeFileSync(join(root, 'later.csv'), 'l\n'));
    assert.deepEqual(await history.files(mine, quiet), { files: [], complete: true });
    assert.equal((await history.files(mine, writer)).files.length, 1);
  });

  it('another agent cannot read the files of a run not its own', async () => {
    const id = await runOf(mine.owner, () => writeFileSync(join(root, 'secret.txt'), 's'));
    assert.equal((await history.files(mine, id)).files.length, 1);
    await assert.rejects(history.files({ owner: 'owner-b' }, id), /No run .* of yours is kept/);
    await assert.rejects(history.files({ owner: undefined }, id), /No run .* of yours is kept/);
  });

  it('a refused run lists nothing; with recording off, a run says its files were not recorded', async () => {
    const refused = await runOf(mine.owner, () => writeFileSync(join(root, 'a.txt'), 'a'), 'refused');
    assert.deepEqual(await history.files(mine, refused), { files: [], complete: true });
    on = false;
    const off = await runOf(mine.owner, () => writeFileSync(join(root, 'b.txt'), 'b'));
    assert.deepEqual(await history.files(mine, off), {
      files: [],
      complete: false,
      reason: 'agentBridge.runs.recordFiles was off',
    });
  });

  it('says when the walk was cut short', async () => {
    history = historyOver({ entries: 3, ms: 10_000 });
    const id = await runOf(mine.owner, () => writeFileSync(join(root, 'new.txt'), 'n'));
    const { complete, reason } = await history.files(mine, id);
    assert.equal(complete, false);
    assert.equal(reason, 'the walk of the workspace stopped at 3 entries');
  });

  it('says when more files were written than are listed, listing the newest', () => {
    const seen = (mtimeMs: number) => ({ mtimeMs, bornMs: mtimeMs, size: 1 });
    const snapshot: WorkspaceSnapshot = {
      startedAt: 2_000,
      sinceMs: 0,
      files: new Map([
        ['/w/a', seen(1_100)],
        ['/w/b', seen(1_300)],
        ['/w/c', seen(1_200)],
        ['/w/old', seen(500)],
      ]),
    };
    const { files, complete, reason } = filesOf(snapshot, { startMs: 1_000, endMs: 1_500 }, [], 2);
    assert.deepEqual(
      files.map((f) => f.path),
      ['/w/b', '/w/c'],
    );
    assert.deepEqual([complete, reason], [false, '1 more files were written than the 2 listed']);
    // A file system that keeps no creation time: written, not said to be created or changed.
    const plain: WorkspaceSnapshot = {
      startedAt: 2_000,
      sinceMs: 0,
      files: new Map([['/w/x', { mtimeMs: 1_100, bornMs: 0, size: 1 }]]),
    };
    assert.equal(filesOf(plain, { startMs: 1_000, endMs: 1_500 }).files[0]?.change, 'written');
  });

  it('a file timed a clock tick before a run’s start is the run’s, unless another run was going on then', () => {
    const snapshot: WorkspaceSnapshot = {
      startedAt: 2_000,
      sinceMs: 0,
      files: new Map([['/w/a', { mtimeMs: 995, bornMs: 995, size: 1 }]]),
    };
    const run = { startMs: 1_000, endMs: 1_500 };
    assert.equal(filesOf(snapshot, run).files.length, 1);
    assert.equal(filesOf(snapshot, run, [{ startMs: 900, endMs: 996 }]).files.length, 0);
    assert.equal(filesOf(snapshot, { startMs: 1_020, endMs: 1_500 }).files.length, 0);
  });

  it('a run’s recorded end (its start to the millisecond, its duration rounded) can be a little early: a file it closed then is its own, not the next run’s', () => {
    // Seen: a run started at 955 for 1 ms created a file at 956 and closed it at 957; the next run started at 964.
    const snapshot: WorkspaceSnapshot = {
      startedAt: 2_000,
      sinceMs: 0,
      files: new Map([['/w/out/a.csv', { mtimeMs: 957.4, bornMs: 956.2, size: 8 }]]),
    };
    const wrote = { startMs: 955, endMs: 956 };
    const next = { startMs: 964, endMs: 967 };
    assert.deepEqual(
      filesOf(snapshot, wrote, [next]).files.map((f) => f.change),
      ['created'],
    );
    assert.deepEqual(filesOf(snapshot, next, [wrote]).files, []);
  });

  it('a file timed a tick early is the run’s that began closest after that time, not a run that began a tick later', () => {
    // Seen: a run began at 41 and wrote a file the clock timed 40; the next run began at 50.
    const snapshot: WorkspaceSnapshot = {
      startedAt: 2_000,
      sinceMs: 0,
      files: new Map([['/w/out/a.csv', { mtimeMs: 40.2, bornMs: 40.1, size: 8 }]]),
    };
    const wrote = { startMs: 41, endMs: 44 };
    const next = { startMs: 50, endMs: 53 };
    assert.deepEqual(
      filesOf(snapshot, wrote, [next]).files.map((f) => f.change),
      ['created'],
    );
    assert.deepEqual(filesOf(snapshot, next, [wrote]).files, []);
  });
});

describe('the workspace walks for the runs’ files', () => {
  /** A walk that takes `ms` and counts how many ran, and how many at once. */
  const counting = (ms: number) => {
    const seen = { walks: 0, atOnce: 0, most: 0, since: [] as number[] };
    const walk = async (sinceMs: number): Promise<WorkspaceSnapshot> => {
      const startedAt = Date.now();
      seen.walks++;
      seen.since.push(sinceMs);
      seen.most = Math.max(seen.most, ++seen.atOnce);
      await sleep(ms);
      seen.atOnce--;
      return { startedAt, sinceMs, files: new Map() };
    };
    return { seen, walk };
  };

  it('one walk answers a burst of runs, made once they pause', async () => {
    const { seen, walk } = counting(5);
    const schedule = new WalkSchedule(walk, { quietMs: 50, latestMs: 5_000 });
    const asked = Date.now();
    const answers: Promise<WorkspaceSnapshot>[] = [];
    for (let i = 0; i < 10; i++) {
      answers.push(schedule.soon(1_000_000 - i));
      await sleep(5);
    }
    const snapshots = await Promise.all(answers);
    assert.equal(seen.walks, 1);
    assert.deepEqual(seen.since, [1_000_000 - 9 - 10]); // the earliest run's start, a clock tick before
    assert.ok(snapshots.every((s) => s === snapshots[0] && s.startedAt >= asked + 50));
  });

  it('a walk asked for now waits only for the one under way, which it does not share', async () => {
    const { seen, walk } = counting(40);
    const schedule = new WalkSchedule(walk, { quietMs: 10_000, latestMs: 10_000 });
    const first = schedule.now(0);
    await sleep(10);
    const askedAt = Date.now();
    const [a, b, c] = await Promise.all([first, schedule.now(0), schedule.soon(0)]);
    assert.deepEqual([seen.walks, seen.most], [2, 1]);
    assert.ok(b.startedAt >= askedAt && b === c && a !== b);
  });

  it('a run’s end never waits for a walk', async () => {
    let walked = false;
    const schedule = new WalkSchedule(async (sinceMs) => {
      walked = true;
      await sleep(10);
      return { startedAt: Date.now(), sinceMs, files: new Map() };
    });
    const history = new RunHistory({ load: () => [], save: () => undefined }, { schedule, on: () => true });
    const action = { id: 1, startedAt: Date.now(), kind: 'execute', owner: 'o', client: 'c' } as unknown as AgentAction;
    history.ended(action, { outcome: 'succeeded', durationMs: 1, detail: '', output: '', ran: 'x' });
    assert.equal(walked, false); // the walk waits for runs to pause
    assert.deepEqual((await history.files({ owner: 'o' }, runIdOf(action))).files, []);
    assert.equal(walked, true);
  });
});
