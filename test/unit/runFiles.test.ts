import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentAction } from '../../src/core/agents/accessPolicy';
import { RunHistory, runIdOf } from '../../src/core/runs/runHistory';
import { workspaceWatch } from '../../src/access/workspaceChanges';

describe('the files a run created or changed (GET /notebooks/runs/:id/files)', function () {
  this.timeout(30_000);
  let root: string;
  let history: RunHistory;
  let next = 1;
  const mine = { owner: 'owner-a' };

  /** An agent's scratchpad run through the history, as the gate drives it: started, `work` done, ended. */
  const runOf = async (owner: string, work: () => void) => {
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
    history.started(action);
    await new Promise((resolve) => setTimeout(resolve, 20));
    work();
    history.ended(action, { outcome: 'succeeded', durationMs: 20, detail: '', output: '', ran: 'work()' });
    return runIdOf(action);
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'run-files-'));
    mkdirSync(join(root, 'data'));
    mkdirSync(join(root, 'node_modules'));
    writeFileSync(join(root, 'data', 'old.csv'), 'a\n');
    writeFileSync(join(root, 'data', 'kept.csv'), 'k\n');
    history = new RunHistory(
      { load: () => [], save: () => undefined },
      workspaceWatch(() => [root]),
    );
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('lists a file the run wrote and one it changed, not those it left alone or in skipped folders', async () => {
    const id = await runOf(mine.owner, () => {
      writeFileSync(join(root, 'data', 'out.csv'), 'x,y\n1,2\n');
      writeFileSync(join(root, 'data', 'old.csv'), 'a\nb\n');
      writeFileSync(join(root, 'node_modules', 'cache.js'), '1');
    });
    const { files, incomplete } = await history.files(mine, id);
    assert.equal(incomplete, undefined);
    assert.deepEqual(files.map((f) => [f.path, f.change, f.bytes]).sort(), [
      [join(root, 'data', 'old.csv'), 'changed', 4],
      [join(root, 'data', 'out.csv'), 'created', 8],
    ]);
  });

  it('lists none for a run that wrote nothing', async () => {
    const id = await runOf(mine.owner, () => undefined);
    assert.deepEqual(await history.files(mine, id), { files: [] });
  });

  it('another agent cannot read the files of a run not its own', async () => {
    const id = await runOf(mine.owner, () => writeFileSync(join(root, 'secret.txt'), 's'));
    assert.equal((await history.files(mine, id)).files.length, 1);
    await assert.rejects(history.files({ owner: 'owner-b' }, id), /No run .* of yours is kept/);
    await assert.rejects(history.files({ owner: undefined }, id), /No run .* of yours is kept/);
  });

  it('says when the walk or the list was cut short', async () => {
    history = new RunHistory(
      { load: () => [], save: () => undefined },
      workspaceWatch(() => [root], { entries: 20_000, ms: 3_000, listed: 2 }),
    );
    const id = await runOf(mine.owner, () => {
      for (const n of [1, 2, 3]) writeFileSync(join(root, `f${n}.txt`), String(n));
    });
    const { files, incomplete } = await history.files(mine, id);
    assert.equal(files.length, 2);
    assert.match(incomplete ?? '', /1 more files changed than the 2 listed/);
  });
});
