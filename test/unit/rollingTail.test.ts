import { strict as assert } from 'node:assert';
import { RollingTail } from '../../src/core/text/rollingTail';

describe('RollingTail', () => {
  const tagged = (max: number) => new RollingTail<{ tag: string; text: string }>(max, (p, text) => ({ tag: p.tag, text }));

  it('keeps the last max characters, cutting the oldest kept piece at its front with its tag', () => {
    const tail = tagged(5);
    tail.push({ tag: 'out', text: 'abc' });
    tail.push({ tag: 'err', text: 'def' });
    assert.deepEqual(tail.kept(), [
      { tag: 'out', text: 'bc' },
      { tag: 'err', text: 'def' },
    ]);
    assert.equal(tail.length, 5);
    assert.equal(tail.droppedChars, 1);
  });

  it('drops whole pieces, and stays exact over many small ones', () => {
    const tail = tagged(10);
    for (let i = 0; i < 5000; i++) tail.push({ tag: 't', text: String(i % 10) });
    assert.equal(
      tail
        .kept()
        .map((p) => p.text)
        .join(''),
      '0123456789',
    );
    assert.equal(tail.length, 10);
    assert.equal(tail.droppedChars, 4990);
  });
});
