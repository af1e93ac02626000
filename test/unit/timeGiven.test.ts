import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { parseStat, TimeGiven, type Sample } from '../../src/kernels/builtin/timeGiven';
import { sleep } from '../../src/core/sleep';

/** A TimeGiven over scripted samples and a scripted clock. */
function scripted(samples: (Sample | undefined)[], times: number[]): TimeGiven {
  return new TimeGiven(
    () => samples.shift(),
    () => times.shift() ?? NaN,
  );
}

describe('time given to a process (the interrupt grace)', () => {
  it('reads state, process group and CPU time from /proc/<pid>/stat, whatever the command name holds', () => {
    const line = '4242 (py (x) 1) R 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 3 0 1000 0 0';
    assert.deepEqual(parseStat(line, 4242), { sleeping: false, cpu: 1750 });
    assert.deepEqual(parseStat(line.replace(') R ', ') S '), undefined), { sleeping: true, cpu: 1750 });
    assert.equal(parseStat(line, 99), undefined, 'a pid now in another group is not the kernel');
    assert.equal(parseStat('garbage', undefined), undefined);
  });

  it('counts only the CPU a running process got, the clock while it sleeps, and the clock when it cannot be read', () => {
    const run = (cpu: number) => ({ sleeping: false, cpu });
    const nap = (cpu: number) => ({ sleeping: true, cpu });
    // A loaded machine: 2 s pass, the process ran 150 ms of them.
    assert.equal(scripted([run(0), run(100), run(150)], [0, 1000, 2000]).read(), 100);
    const busy = scripted([run(0), run(100), run(150)], [0, 1000, 2000]);
    busy.read();
    assert.equal(busy.read(), 150);
    // Asleep at both ends of an interval: the clock.
    const sleeper = scripted([nap(0), nap(0), nap(0)], [0, 1000, 2500]);
    sleeper.read();
    assert.equal(sleeper.read(), 2500);
    // Woken in between (it had work to do): its CPU.
    assert.equal(scripted([nap(0), run(30)], [0, 1000]).read(), 30);
    assert.equal(scripted([undefined, undefined], [0, 700]).read(), 700, 'not Linux, or gone: the clock');
  });

  it('finds a real sleeping process asleep', async function () {
    if (process.platform !== 'linux') this.skip();
    const child = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      await sleep(200);
      const given = TimeGiven.of(child.pid, child.pid);
      await sleep(300);
      given.read();
      await sleep(300);
      assert.ok(given.read() >= 550, 'a sleeper has had the time that passed');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
