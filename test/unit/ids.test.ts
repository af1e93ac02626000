import { strict as assert } from 'node:assert';
import { freshId, randomHex, randomToken, timedId } from '../../src/core/ids';
import { sleep } from '../../src/core/sleep';

describe('ids', () => {
  it('randomToken is URL-safe base64 of the bytes asked for; randomHex is hex', () => {
    assert.match(randomToken(18), /^[A-Za-z0-9_-]{24}$/);
    assert.match(randomHex(16), /^[0-9a-f]{32}$/);
    assert.notEqual(randomHex(16), randomHex(16));
  });

  it('timedId is prefix, time and a random tag, and sorts by time', async () => {
    const first = timedId('up');
    assert.match(first, /^up-[0-9a-z]+-[0-9a-f]{6}$/);
    await sleep(5);
    const later = timedId('up');
    assert.ok(later.split('-')[1]! > first.split('-')[1]!, `${later} after ${first}`);
  });

  it('freshId never answers a taken id', () => {
    const taken = new Set<string>();
    // One character of 36: the last ones can only be found by skipping the taken ones.
    for (let i = 0; i < 36; i++) {
      const id = freshId('c', 1, taken);
      assert.match(id, /^c[0-9a-z]$/);
      assert.equal(taken.has(id), false, `${id} was taken`);
      taken.add(id);
    }
    assert.equal(taken.size, 36);
  });
});
