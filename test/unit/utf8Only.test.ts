import { strict as assert } from 'node:assert';
import { decode, encodingExists, getDecoder } from '../../src/server/standIns/utf8Only';

describe('iconv-lite stand-in (UTF-8 only)', () => {
  it('decodes UTF-8 split anywhere, dropping a leading byte-order mark', () => {
    const bytes = Buffer.from('\ufeff{"code":"日本 ✓"}');
    const decoder = getDecoder('utf-8');
    const text = [bytes.subarray(0, 2), bytes.subarray(2, 13), bytes.subarray(13)].map((b) => decoder.write(b)).join('');
    assert.equal(text + (decoder.end() ?? ''), '{"code":"日本 ✓"}');
    assert.equal(decode(bytes, 'UTF8'), '{"code":"日本 ✓"}');
  });
  it('knows no other charset', () => {
    assert.deepEqual([encodingExists('utf-8'), encodingExists('latin1')], [true, false]);
    assert.throws(() => getDecoder('latin1'), /Encoding not recognized/);
  });
});
