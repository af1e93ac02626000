import { strict as assert } from 'node:assert';
import { cappedLog, type Log } from '../../src/core/log';

describe('capped log', () => {
  it('cuts long lines, saying how much was left out, and passes short ones as they are', () => {
    const lines: string[] = [];
    const sink: Log = {
      debug: (m) => lines.push(m),
      info: (m) => lines.push(m),
      warn: (m) => lines.push(m),
      error: (m) => lines.push(m),
    };
    const log = cappedLog(sink, 10);
    log.info('short');
    log.error('x'.repeat(15_000));
    assert.deepEqual(lines, ['short', `${'x'.repeat(10)}… (14990 more chars)`]);
  });
});
