import assert from 'node:assert/strict';
import { OutputBudget } from '../../src/kernels/builtin/outputBudget';
import { LineFramer, type OversizeFrame } from '../../src/kernels/builtin/kernelWire';
import { StrayOutputRecord } from '../../src/kernels/builtin/strayOutput';

describe('kernel output limits', () => {
  describe('LineFramer', () => {
    function framer(max: number) {
      const lines: string[] = [];
      const oversize: OversizeFrame[] = [];
      const f = new LineFramer(
        max,
        (l) => lines.push(l),
        (o) => oversize.push(o),
      );
      return { f, lines, oversize };
    }

    it('splits lines across chunks, also inside a UTF-8 sequence, and skips empty lines', () => {
      const { f, lines } = framer(100);
      const bytes = Buffer.from('{"a":"é✓"}\n\n{"b":1}\n{"c"');
      for (const b of bytes) f.push(Buffer.from([b]));
      f.push(Buffer.from(':2}\n'));
      assert.deepEqual(lines, ['{"a":"é✓"}', '{"b":1}', '{"c":2}']);
    });

    it('skips an oversize line up to its newline, says whose it was, and resyncs', () => {
      const { f, lines, oversize } = framer(64);
      f.push(Buffer.from('{"type":"ok"}\n{"type":"stream","id":7,"name":"stdout","text":"'));
      for (let i = 0; i < 10; i++) f.push(Buffer.alloc(50, 'x'));
      f.push(Buffer.from('"}\n{"type":"done","id":7}\n'));
      f.push(Buffer.from(`{"type":"call","rid":3,"id":7,"params":"${'y'.repeat(80)}"}\n`));
      assert.deepEqual(lines, ['{"type":"ok"}', '{"type":"done","id":7}']);
      assert.deepEqual(oversize, [
        { bytes: 550, type: 'stream', id: 7, rid: undefined },
        { bytes: 122, type: 'call', id: 7, rid: 3 },
      ]);
    });
  });

  describe('OutputBudget', () => {
    it('passes output through within the head', () => {
      const b = new OutputBudget(10, 4);
      assert.equal(b.take('stdout', 'hello'), 'hello');
      assert.equal(b.take('stderr', 'world'), 'world');
      assert.equal(b.finish(), null);
    });

    it('keeps head and tail of a flood, with a marker saying how much was cut', () => {
      const b = new OutputBudget(10, 4);
      assert.equal(b.take('stdout', '0123456789AB'), '0123456789');
      for (let i = 0; i < 1000; i++) assert.equal(b.take('stdout', 'xyz\n'), '');
      assert.equal(b.take('stderr', 'E!'), '');
      const held = b.finish();
      assert.ok(held);
      assert.deepEqual(held.tail, [
        { name: 'stdout', text: 'z\n' },
        { name: 'stderr', text: 'E!' },
      ]);
      assert.match(held.marker, /\[\.\.\. 4000 of 4014 characters of output cut by Agent Bridge/);
    });
  });

  describe('StrayOutputRecord', () => {
    it('counts stray output, keeps a bounded tail and logs at most once a second', () => {
      const lines: string[] = [];
      const stray = new StrayOutputRecord((l) => lines.push(l));
      for (let i = 0; i < 1000; i++) stray.add('stdout', `THREAD-LEAK ${i}\n`, 'of run 1, which ended');
      stray.add('stderr', 'x'.repeat(20_000), 'between runs');
      const { count, chars, tail } = stray.snapshot;
      assert.equal(count, 1001);
      assert.ok(chars > 20_000);
      assert.equal(tail, 'x'.repeat(8192));
      assert.equal(lines.length, 1);
      assert.match(lines[0]!, /of no active run \(of run 1, which ended; 1 pieces/);
    });
  });
});
