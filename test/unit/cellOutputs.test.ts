import { strict as assert } from 'node:assert';
import type { RawOutput } from '../../src/core/model/cellService';
import {
  ERROR_MIME,
  logicalItems,
  OutputFollower,
  shapeOutputs,
  STDERR_MIME,
  STDOUT_MIME,
} from '../../src/core/outputs/cellOutputs';

const enc = (s: string) => new TextEncoder().encode(s);
const item = (mime: string, text: string) => ({ mime, data: enc(text) });
const url = (o: number, i: number) => `/raw/${o}/${i}`;

describe('output shaping', () => {
  it('types streams, errors and rich items', () => {
    const outputs: RawOutput[] = [
      { items: [item(STDOUT_MIME, 'a\n'), item(STDOUT_MIME, 'b\n')] },
      { items: [item(STDERR_MIME, '\x1b[31mwarn\x1b[0m\n')] },
      {
        items: [
          item(
            ERROR_MIME,
            JSON.stringify({ name: 'ValueError', message: 'bad', stack: '\x1b[0;31mTraceback\x1b[0m...\nValueError: bad' }),
          ),
        ],
      },
      { items: [item('text/html', '<b>x</b>'), item('text/plain', 'x'), item('application/json', '{"a":1}')] },
    ];
    const [out, err, error, rich] = shapeOutputs(outputs, { limit: 100, url });
    assert.deepEqual(out!.items, [{ type: 'stdout', text: 'a\nb\n', bytes: 4 }]);
    assert.equal(err!.items[0]!.text, 'warn\n');
    assert.deepEqual(error!.items[0], {
      type: 'error',
      name: 'ValueError',
      message: 'bad',
      traceback: 'Traceback...\nValueError: bad',
      bytes: error!.items[0]!.bytes,
    });
    assert.deepEqual(
      rich!.items.map((i) => [i.type, i.text]),
      [
        ['text/html', '<b>x</b>'],
        ['text/plain', 'x'],
        ['application/json', '{"a":1}'],
      ],
    );
  });

  it('serves binary items by reference only', () => {
    const png = { mime: 'image/png', data: new Uint8Array([137, 80, 78, 71, 0, 1]) };
    const [view] = shapeOutputs([{ items: [png] }], { limit: 100, url });
    assert.deepEqual(view!.items[0], { type: 'image/png', bytes: 6, url: '/raw/0/0' });
  });

  it('cuts long text to its head and tail, says how much was cut and points at the whole', () => {
    const text = 'H'.repeat(20) + 'm'.repeat(10) + 'T'.repeat(20);
    const [view] = shapeOutputs([{ items: [item('text/plain', text)] }], { limit: 10, url });
    assert.deepEqual(view!.items[0], {
      type: 'text/plain',
      text: 'HHHHH\n[... 40 characters cut here; the whole item: GET /raw/0/0 ...]\nTTTTT',
      omitted: 40,
      bytes: 50,
      truncated: true,
      url: '/raw/0/0',
    });
  });

  it('keeps the end of a long traceback, where the error is', () => {
    const stack = Array.from({ length: 40 }, (_, i) => `frame ${i}`).join('\n') + '\nKeyError: k';
    const [view] = shapeOutputs([{ items: [item(ERROR_MIME, JSON.stringify({ name: 'KeyError', message: 'k', stack }))] }], {
      limit: 30,
      url,
    });
    const e = view!.items[0]!;
    assert.equal(e.truncated, true);
    assert.ok(e.traceback!.startsWith('frame 0'));
    assert.ok(e.traceback!.endsWith('KeyError: k'));
    assert.equal(e.message, 'k');
    assert.equal(e.omitted, stack.length - 29);
    assert.match(e.traceback!, /characters cut here; the whole item: GET \/raw\/0\/0/);
  });

  it('joins consecutive chunks of one stream, not of different streams', () => {
    const items = logicalItems({
      items: [item(STDOUT_MIME, 'a'), item(STDOUT_MIME, 'b'), item(STDERR_MIME, 'c'), item(STDOUT_MIME, 'd')],
    });
    assert.deepEqual(
      items.map((i) => [i.mime, new TextDecoder().decode(i.data)]),
      [
        [STDOUT_MIME, 'ab'],
        [STDERR_MIME, 'c'],
        [STDOUT_MIME, 'd'],
      ],
    );
  });
});

describe('following a run', () => {
  it('reports stream growth as deltas and rich items once, skipping the baseline', () => {
    const baseline: RawOutput[] = [{ items: [item(STDOUT_MIME, 'old\n')] }];
    const f = new OutputFollower(baseline);
    assert.deepEqual(f.next(baseline, 100, url), []);
    assert.deepEqual(f.next([], 100, url), []); // cleared when the run starts
    assert.deepEqual(f.next([{ items: [item(STDOUT_MIME, 'old\n')] }], 100, url), [{ kind: 'stdout', text: 'old\n' }]);
    assert.deepEqual(f.next([{ items: [item(STDOUT_MIME, 'old\n'), item(STDOUT_MIME, 'more\n')] }], 100, url), [
      { kind: 'stdout', text: 'more\n' },
    ]);
    const withValue = [{ items: [item(STDOUT_MIME, 'old\nmore\n')] }, { items: [item('text/plain', '42')] }];
    const events = f.next(withValue, 100, url);
    assert.deepEqual(events, [{ kind: 'output', item: { type: 'text/plain', text: '42', bytes: 2 } }]);
    assert.deepEqual(f.next(withValue, 100, url), []);
  });
});
