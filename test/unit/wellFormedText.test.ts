import { strict as assert } from 'node:assert';
import { findLoneSurrogate, refuseLoneSurrogates } from '../../src/core/text/wellFormedText';

describe('text the editor would mangle (lone surrogates)', () => {
  it('finds a lone high or low surrogate, with its path and position; pairs, astral characters and combining marks pass', () => {
    assert.deepEqual(findLoneSurrogate({ ops: [{ code: "s = '\ud800'" }] }), { path: 'ops.0.code', index: 5 });
    assert.deepEqual(findLoneSurrogate('x\udc00'), { path: '', index: 1 });
    assert.equal(findLoneSurrogate({ code: "s = '😀𝒳 é'", tags: ['a\u20dd'] }), undefined);
    assert.equal(findLoneSurrogate("'\ud83d\ude00'"), undefined);
  });

  it('refuses with a 400 that names where', () => {
    assert.throws(
      () => refuseLoneSurrogates({ code: "x = '\udfff'" }),
      (e: { status: number; detail: string }) => e.status === 400 && /"code".*character 5/.test(e.detail),
    );
  });
});
