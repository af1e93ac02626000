import { strict as assert } from 'node:assert';
import type { CancellationToken } from 'vscode';
import { ACCESS_REVOKED, watchRevocation } from '../../src/kernels/accessRevoked';
import type { ApiKernel } from '../../src/kernels/extensionApi';

const token = { isCancellationRequested: false } as CancellationToken;
const output = (text: string) => ({ items: [{ mime: 'text/plain', data: new TextEncoder().encode(text) }] });

/** A fake of the Jupyter extension's kernel: yields the outputs, then throws `error` if given. */
function fakeKernel(outputs: string[], error?: Error): ApiKernel {
  return {
    async *executeCode() {
      for (const o of outputs) yield output(o);
      if (error) throw error;
    },
  };
}

async function drain(kernel: ApiKernel): Promise<string[]> {
  const seen: string[] = [];
  for await (const o of kernel.executeCode('x', token)) seen.push(new TextDecoder().decode(o.items[0]!.data));
  return seen;
}

describe('access taken away after an Allow (Jupyter kernels)', () => {
  it('passes outputs through untouched while access holds', async () => {
    let revoked = 0;
    const watched = watchRevocation(fakeKernel(['a', 'b']), () => (revoked++, new Error('refused')));
    assert.deepEqual(await drain(watched), ['a', 'b']);
    assert.equal(revoked, 0);
  });

  it("replaces Jupyter's revocation error with the bridge's refusal, and records it", async () => {
    const revokedError = Object.assign(new Error('Access to Jupyter Kernel has been revoked'), { name: ACCESS_REVOKED });
    let revoked = 0;
    const watched = watchRevocation(fakeKernel([], revokedError), () => (revoked++, new Error('refused: use Manage Access')));
    await assert.rejects(drain(watched), { message: 'refused: use Manage Access' });
    assert.equal(revoked, 1);
  });

  it('leaves any other failure as it is', async () => {
    let revoked = 0;
    const dead = new Error('Kernel is dead or terminating');
    const watched = watchRevocation(fakeKernel(['partial'], dead), () => (revoked++, new Error('refused')));
    await assert.rejects(drain(watched), dead);
    assert.equal(revoked, 0);
  });
});
