import { strict as assert } from 'node:assert';
import { CoalescedTask } from '../../src/core/flow/coalescedTask';

const tick = (ms = 0) => new Promise<void>((r) => setTimeout(r, ms));

describe('CoalescedTask (src/core/flow/coalescedTask.ts)', () => {
  it('runs one at a time, and folds the calls made during a run into one more run', async () => {
    let runs = 0;
    let inFlight = 0;
    let release = () => {};
    const task = new CoalescedTask(
      async () => {
        runs++;
        inFlight++;
        assert.equal(inFlight, 1, 'never two at once');
        await new Promise<void>((r) => (release = r));
        inFlight--;
      },
      10,
      () => undefined,
    );
    const first = task.now();
    const during = [task.now(), task.now(), task.now()];
    release();
    await tick();
    assert.equal(runs, 2, 'one more run for all the calls made during the first');
    release();
    await Promise.all([first, ...during]);
    assert.equal(runs, 2);
  });

  it('soon() gathers a burst into one run after the delay; now() runs at once', async () => {
    let runs = 0;
    const task = new CoalescedTask(
      async () => void runs++,
      30,
      () => undefined,
    );
    for (let i = 0; i < 50; i++) task.soon();
    assert.equal(runs, 0);
    await tick(60);
    assert.equal(runs, 1);
    task.soon();
    await task.now();
    assert.equal(runs, 2, 'now() takes the pending soon() with it');
    await tick(60);
    assert.equal(runs, 2);
  });

  it('tells a failed run from soon() to onError, and rejects a now() caller', async () => {
    const errors: unknown[] = [];
    const task = new CoalescedTask(
      () => Promise.reject(new Error('boom')),
      5,
      (e) => errors.push(e),
    );
    task.soon();
    await tick(30);
    assert.equal((errors[0] as Error).message, 'boom');
    await assert.rejects(task.now(), /boom/);
  });
});
