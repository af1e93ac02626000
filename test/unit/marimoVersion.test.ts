import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KeyedQueue } from '../../src/core/flow/keyedQueue';
import { MARIMO_PROTOCOL_VERSION, MarimoVersions, parseVersion, VERSION_PROGRAM } from '../../src/core/runs/marimoVersion';
import { sleep } from '../../src/core/sleep';
import { FakeKernel } from './fakes/notebookHost';

const printed = (text: string) => ({
  steps: [{ name: 'stdout' as const, text }],
  result: { success: true, status: 'succeeded' as const, output: { mimetype: 'text/plain', data: '' } },
});

/** Whether a version is at least 0.21.1, the marimo that shipped code mode, as marimo-pair's skill checks. */
const hasCodeMode = (v: string) => {
  const [a = 0, b = 0, c = 0] = v.split('.').map((n) => parseInt(n, 10));
  return a > 0 || b > 21 || (b === 21 && c >= 1);
};

describe('the marimo version given where marimo gives its own', () => {
  it('is the marimo the bridge mirrors, pinned for the conformance suite, and it has code mode', () => {
    const pinned = /^marimo==(.+)$/m.exec(readFileSync(join(__dirname, '../../scripts/venv-requirements.txt'), 'utf8'))?.[1];
    assert.equal(MARIMO_PROTOCOL_VERSION, pinned);
    assert.ok(hasCodeMode(MARIMO_PROTOCOL_VERSION));
  });

  it("is a marimo kernel's own once read, with one scratchpad run per session; closed sessions are forgotten", async () => {
    const kernel = new FakeKernel({ [VERSION_PROGRAM]: printed('agent-bridge-marimo-version:0.23.4\n') });
    let learned = 0;
    const versions = new MarimoVersions(new KeyedQueue(), () => learned++);
    assert.equal(versions.current(), MARIMO_PROTOCOL_VERSION);
    versions.learn([{ id: 's_m' }], () => Promise.resolve(kernel));
    versions.learn([{ id: 's_m' }], () => Promise.resolve(kernel));
    while (!learned) await sleep(5);
    assert.equal(versions.current(), '0.23.4');
    assert.equal(kernel.calls.length, 1);
    versions.learn([], () => Promise.resolve(kernel));
    assert.equal(versions.current(), MARIMO_PROTOCOL_VERSION);
  });

  it('asks again at the next change while no marimo kernel serves the session; a failed read is not retried', async () => {
    const versions = new MarimoVersions(new KeyedQueue(), () => undefined);
    let asked = 0;
    versions.learn([{ id: 's_m' }], () => (asked++, Promise.resolve(undefined)));
    await sleep(20);
    versions.learn([{ id: 's_m' }], () => (asked++, Promise.resolve(undefined)));
    await sleep(20);
    assert.equal(asked, 2);
    const broken = new FakeKernel({ [VERSION_PROGRAM]: printed('ModuleNotFoundError\n') });
    versions.learn([{ id: 's_m' }], () => Promise.resolve(broken));
    await sleep(20);
    versions.learn([{ id: 's_m' }], () => Promise.resolve(broken));
    await sleep(20);
    assert.equal(broken.calls.length, 1);
    assert.equal(versions.current(), MARIMO_PROTOCOL_VERSION);
  });

  it('reads the marked line only', () => {
    assert.equal(parseVersion('x\nagent-bridge-marimo-version:0.25.2\n'), '0.25.2');
    assert.equal(parseVersion('0.25.2\n'), undefined);
  });
});
