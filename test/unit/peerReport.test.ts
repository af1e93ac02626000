import { strict as assert } from 'node:assert';
import { type PeerColumn, type PeerRow, ratio, renderMarkdown, renderSvg } from '../../scripts/bench/peerReport';
import { wholeOutputUrl } from '../../scripts/bench/peerTargets';
import { cappedNote } from '../../src/core/outputs/scratchpadOutputs';

const cols: PeerColumn[] = [
  { name: 'ours', ours: true },
  { name: 'peer A', ours: false },
  { name: 'peer B', ours: false },
];

describe('the peers table (scripts/bench/peerReport.ts)', () => {
  it('gives the best peer over ours for times, ours over the best peer for runs/s', () => {
    const time: PeerRow = { workload: 't', unit: 'ms', lowerIsBetter: true, values: [2, 10, 8] };
    const rate: PeerRow = { workload: 'r', unit: 'runs/s', lowerIsBetter: false, values: [30, 10, 15] };
    assert.equal(ratio(time, cols, 0), 4);
    assert.equal(ratio(rate, cols, 0), 2);
  });

  it('gives a row whose work differs between targets no ratio, says why, and draws no bar for it', () => {
    const row: PeerRow = { workload: 'value', unit: 'ms', lowerIsBetter: true, values: [2, 10, 8], differs: 'each formats it' };
    assert.ok(Number.isNaN(ratio(row, cols, 0)));
    const md = renderMarkdown([row], cols);
    const line = md.split('\n').find((l) => l.startsWith('| value'));
    assert.ok(line?.includes('(work differs: each formats it)'), line);
    assert.ok(line?.trimEnd().endsWith('| – |'), line);
    assert.ok(!renderSvg([row], cols).includes('value —'));
  });
});

describe("the peers bench's reading of a capped scratchpad answer", () => {
  const kept = { id: 'abc', text: 'x'.repeat(10), printed: 10, complete: true, expiresAt: Date.now() + 600_000 };
  const url = 'http://127.0.0.1:1234/notebooks/scratchpad/outputs/abc';

  it('finds the URL of the whole output in the note the bridge streams', () => {
    assert.equal(wholeOutputUrl(`head${cappedNote({ cutChars: 5, headChars: 3 }, kept, url)}tail`), url);
  });

  it('finds none where only a part was kept, or nothing was cut', () => {
    assert.equal(
      wholeOutputUrl(cappedNote({ cutChars: 5, headChars: 3 }, { ...kept, complete: false, printed: 99 }, url)),
      undefined,
    );
    assert.equal(wholeOutputUrl('plain stderr'), undefined);
  });
});
