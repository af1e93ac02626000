import { strict as assert } from 'node:assert';
import { cutNote, HeadTail } from '../../src/core/text/headTail';

describe('head and tail of a long text', () => {
  it('keeps everything under the cap', () => {
    const kept = new HeadTail(10);
    for (const piece of ['ab', 'cd', 'ef']) kept.push(piece);
    assert.deepEqual([kept.pieces().join(''), kept.cutChars], ['abcdef', 0]);
  });

  it('keeps the first and last halves, with a note saying how much was cut', () => {
    const kept = new HeadTail(10);
    for (let i = 0; i < 10; i++) kept.push(String(i).repeat(3));
    assert.equal(kept.pieces().join(''), `00011${cutNote(20)}88999`);
    assert.equal(kept.cutChars, 20);
  });

  it('stays bounded over a million small pieces', () => {
    const kept = new HeadTail(100);
    for (let i = 0; i < 1_000_000; i++) kept.push('x');
    const text = kept.pieces().join('');
    assert.equal(text, `${'x'.repeat(50)}${cutNote(999_900)}${'x'.repeat(50)}`);
  });
});
