import { strict as assert } from 'node:assert';
import { jsonHead } from '../../src/core/text/jsonHead';

describe('jsonHead', () => {
  const samples: unknown[] = [
    { a: 1, b: 'two "quoted"\n\u2028', c: [1, null, undefined, () => 1, NaN, Infinity], d: undefined, e: { f: true } },
    [{ at: new Date(0) }, 'é😀', -0, 1e21, [], {}],
    'a plain string',
    { nested: { deeper: { deepest: [1, [2, [3, [4]]]] } }, symbol: Symbol('s'), fn: () => 2 },
  ];

  it('is JSON.stringify cut at any length', () => {
    for (const value of samples) {
      const whole = JSON.stringify(value);
      for (let n = 0; n <= whole.length + 2; n++) assert.equal(jsonHead(value, n), whole.slice(0, n), `${whole} at ${n}`);
    }
  });

  it('writes only its head of a huge or cyclic value', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic['self'] = cyclic;
    assert.equal(jsonHead(cyclic, 40), '{"name":"loop","self":{"name":"loop","se');
    assert.equal(jsonHead({ text: 'x'.repeat(50_000_000) }, 12), '{"text":"xxx');
  });
});
