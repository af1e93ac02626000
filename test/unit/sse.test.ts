import { strict as assert } from 'node:assert';
import type { ServerResponse } from 'node:http';
import { frameEvent, HEADERS_ALONE_AFTER_MS, openEventStream, SEND_AT_CHARS } from '../../src/server/sse';

/** Fake of the ServerResponse calls openEventStream makes, recording each in order. */
class RecordingResponse {
  calls: string[] = [];
  writableEnded = false;
  destroyed = false;
  writeHead(status: number) {
    this.calls.push(`writeHead ${status}`);
    return this;
  }
  flushHeaders() {
    this.calls.push('flushHeaders');
  }
  write(text: string) {
    this.calls.push(`write ${text}`);
    return true;
  }
  end(text?: string) {
    this.writableEnded = true;
    this.calls.push(`end ${text ?? ''}`);
    return this;
  }
}

const open = () => {
  const res = new RecordingResponse();
  return { res, stream: openEventStream(res as unknown as ServerResponse) };
};
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const out = frameEvent('stdout', { data: '1\n' });
const err = frameEvent('stderr', { data: 'x\n' });
const done = frameEvent('done', { success: true });

describe('event stream', () => {
  it('sends a quick run (headers, output and done) in one write', async () => {
    const { res, stream } = open();
    stream.send('stdout', { data: '1\n' });
    await Promise.resolve();
    stream.end('done', { success: true });
    await sleep(HEADERS_ALONE_AFTER_MS + 20);
    assert.deepEqual(res.calls, ['writeHead 200', `end ${out}${done}`]);
  });

  it('sends what one loop turn produced together, as soon as the turn ends', async () => {
    const { res, stream } = open();
    stream.send('stdout', { data: '1\n' });
    stream.send('stderr', { data: 'x\n' });
    await nextTurn();
    assert.deepEqual(res.calls, ['writeHead 200', `write ${out}${err}`]);
    stream.send('stdout', { data: '1\n' });
    await nextTurn();
    stream.end();
    assert.deepEqual(res.calls.slice(2), [`write ${out}`, 'end ']);
  });

  it('sends a big event at once instead of holding it to the end of the turn', () => {
    const { res, stream } = open();
    const big = 'x'.repeat(SEND_AT_CHARS);
    stream.send('stdout', { data: '1\n' });
    stream.send('stdout', { data: big });
    assert.deepEqual(res.calls, ['writeHead 200', `write ${out}${frameEvent('stdout', { data: big })}`]);
    stream.end();
    assert.deepEqual(res.calls.slice(2), ['end ']);
  });

  it('sends the 200 alone when the run stays silent', async () => {
    const { res, stream } = open();
    await nextTurn();
    assert.deepEqual(res.calls, ['writeHead 200']);
    await sleep(HEADERS_ALONE_AFTER_MS + 20);
    assert.deepEqual(res.calls, ['writeHead 200', 'flushHeaders']);
    stream.end('done', { success: true });
    assert.deepEqual(res.calls.slice(2), [`end ${done}`]);
  });

  it('writes nothing more once the client is gone', async () => {
    const { res, stream } = open();
    stream.send('stdout', { data: '1\n' });
    res.destroyed = true;
    assert.equal(stream.closed, true);
    await sleep(HEADERS_ALONE_AFTER_MS + 20);
    stream.send('stdout', { data: '2\n' });
    stream.end('done', { success: true });
    assert.deepEqual(res.calls, ['writeHead 200']);
  });
});
