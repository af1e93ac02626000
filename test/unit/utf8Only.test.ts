import { strict as assert } from 'node:assert';
import { decode, encodingExists, getDecoder } from '../../src/server/utf8Only';

describe('UTF-8-only iconv stand-in', () => {
  it('knows utf-8 under its usual spellings and nothing else', () => {
    for (const e of ['utf-8', 'UTF-8', 'utf8']) assert.equal(encodingExists(e), true);
    for (const e of ['utf-16le', 'latin1', 'koi8-r']) assert.equal(encodingExists(e), false);
  });
  it('decodes, dropping a BOM, and refuses other charsets the way iconv-lite does', () => {
    assert.equal(decode(Buffer.from('\ufeff{"a":"é"}'), 'utf-8'), '{"a":"é"}');
    assert.throws(() => decode(Buffer.from('x'), 'latin1'), /^Error: Encoding not recognized: /);
  });
  it('streams multi-byte characters split across chunks', () => {
    const bytes = Buffer.from('日本 ✓');
    const d = getDecoder('utf8');
    const text = [d.write(bytes.subarray(0, 2)), d.write(bytes.subarray(2, 5)), d.write(bytes.subarray(5)), d.end() ?? ''].join(
      '',
    );
    assert.equal(text, '日本 ✓');
  });
});
