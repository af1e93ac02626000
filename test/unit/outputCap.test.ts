import { strict as assert } from 'node:assert';
import { OutputCap } from '../../src/core/outputs/outputCap';
import { ScratchpadOutputs } from '../../src/core/outputs/scratchpadOutputs';
import { MAX_EVENT_CHARS, splitAtLines } from '../../src/server/sse';

const lines = (n: number) => Array.from({ length: n }, (_, i) => `${String(i).padStart(8, '0')} ${'x'.repeat(91)}\n`).join('');

describe('splitAtLines', () => {
  it('cuts long text into pieces of at most the bound, at line ends, losing nothing', () => {
    const text = lines(1000);
    const pieces = splitAtLines(text);
    assert.equal(pieces.join(''), text);
    assert.ok(pieces.every((p) => p.length <= MAX_EVENT_CHARS));
    assert.ok(pieces.slice(0, -1).every((p) => p.endsWith('\n')));
  });

  it('cuts a line longer than the bound where it must, never inside a surrogate pair', () => {
    const text = `${'a'.repeat(9)}😀${'b'.repeat(20)}`;
    const pieces = splitAtLines(text, 10);
    assert.equal(pieces.join(''), text);
    assert.deepEqual(pieces[0], 'a'.repeat(9));
    assert.ok(pieces.every((p) => p.length <= 10));
  });

  it('leaves short text whole', () => {
    assert.deepEqual(splitAtLines('one\ntwo\n'), ['one\ntwo\n']);
  });
});

describe('OutputCap', () => {
  it('passes output under the cap through, head as it comes and the rest at the end', () => {
    const cap = new OutputCap(100);
    assert.deepEqual(cap.push({ name: 'stdout', text: 'a\n'.repeat(20) }), { name: 'stdout', text: 'a\n'.repeat(20) });
    assert.equal(cap.push({ name: 'stderr', text: 'b\n'.repeat(20) })?.text, 'b\n'.repeat(5));
    const end = cap.finish();
    assert.equal(end.cutChars, 0);
    assert.deepEqual(end.tail, [{ name: 'stderr', text: 'b\n'.repeat(15) }]);
  });

  it('keeps head and tail at line ends and counts exactly what it cut', () => {
    const text = lines(1000);
    const cap = new OutputCap(10_000);
    let head = '';
    for (const piece of splitAtLines(text, 777)) head += cap.push({ name: 'stdout', text: piece })?.text ?? '';
    const end = cap.finish();
    const tail = end.tail.map((e) => e.text).join('');
    assert.ok(head.endsWith('\n') && text.startsWith(head) && head.length <= 5000);
    assert.ok(text.endsWith(tail) && tail.length <= 5000 && text[text.length - tail.length - 1] === '\n');
    assert.equal(head.length + end.cutChars + tail.length, text.length);
    assert.equal(end.headChars, head.length);
    assert.equal(end.printed, text.length);
  });
});

describe('ScratchpadOutputs', () => {
  it('keeps a whole output for a while, then says it is gone; an id never given is told apart', () => {
    let now = 0;
    const outputs = new ScratchpadOutputs({ runChars: 100, totalChars: 1000, keepMs: 1000 }, () => now);
    const rec = outputs.record();
    rec.push('hello ');
    rec.push('world');
    const kept = outputs.keep(rec);
    assert.deepEqual([kept.text, kept.printed, kept.complete], ['hello world', 11, true]);
    assert.deepEqual(outputs.get(kept.id), kept);
    now = 1000;
    assert.equal(outputs.get(kept.id), 'gone');
    assert.equal(outputs.get('never-given'), undefined);
  });

  it('keeps at most runChars of a run, says so, and drops the oldest past totalChars', () => {
    const outputs = new ScratchpadOutputs({ runChars: 10, totalChars: 15, keepMs: 60_000 });
    const keep = (text: string) => {
      const rec = outputs.record();
      rec.push(text);
      return outputs.keep(rec);
    };
    const first = keep('0123456789abc');
    assert.deepEqual([first.text, first.printed, first.complete], ['0123456789', 13, false]);
    const second = keep('xxxxxxxx');
    assert.equal(outputs.get(first.id), 'gone');
    assert.deepEqual(outputs.get(second.id), second);
  });
});
