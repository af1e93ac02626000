import { strict as assert } from 'node:assert';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import {
  DEFAULT_LIMITS,
  droppedNote,
  frameEvent,
  HEADERS_ALONE_AFTER_MS,
  heartbeat,
  openEventStream,
  SEND_AT_CHARS,
  stalledNote,
  type StreamLimits,
} from '../../src/server/sse';
import { sleep } from '../../src/core/sleep';

/** Fake of the ServerResponse calls openEventStream makes, recording each in order. */
class RecordingResponse extends EventEmitter {
  calls: string[] = [];
  /** What write() answers: false plays a socket whose buffer is full until 'drain'. */
  accepts = true;
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
    return this.accepts;
  }
  end(text?: string) {
    this.writableEnded = true;
    this.calls.push(`end ${text ?? ''}`);
    return this;
  }
}

const open = (limits: StreamLimits = DEFAULT_LIMITS) => {
  const res = new RecordingResponse();
  return { res, stream: openEventStream(res as unknown as ServerResponse, limits) };
};
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
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

  it('says a silent run is alive with a comment after each silence, none while output flows, none after the end', async () => {
    const { res, stream } = open({ ...DEFAULT_LIMITS, heartbeatMs: 60 });
    const beats = () => res.calls.filter((c) => /^write : running \d+ s\n\n$/.test(c)).length;
    while (!beats()) await sleep(10);
    assert.deepEqual(res.calls, ['writeHead 200', 'flushHeaders', `write ${heartbeat(0)}`]);
    stream.send('stdout', { data: '1\n' });
    await nextTurn();
    assert.equal(res.calls.at(-1), `write ${out}`, 'output goes out as it comes');
    while (beats() < 2) await sleep(10);
    assert.match(res.calls.at(-1)!, /^write : running \d+ s\n\n$/, 'a silence after output is said too');
    stream.end('done', { success: true });
    const ended = res.calls.length;
    await sleep(150);
    assert.equal(res.calls.length, ended, 'nothing after the end');
    assert.equal(heartbeat(5), ': running 5 s\n\n');
  });

  it('stops its heartbeat when the client goes away', async () => {
    const { res } = open({ ...DEFAULT_LIMITS, heartbeatMs: 30 });
    res.destroyed = true;
    res.emit('close');
    await sleep(100);
    assert.deepEqual(res.calls, ['writeHead 200']);
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

  describe('a client that reads slower than the run writes', () => {
    const line = (i: number) => ({ data: `${i}`.padStart(99, '.') + '\n' });
    const sizeOf = (i: number) => frameEvent('stdout', line(i)).length;

    it('holds events until drain, then drops past the hold limit with a note saying how much', async () => {
      const { res, stream } = open({ holdChars: 3 * sizeOf(0), stallMs: 60_000 });
      res.accepts = false;
      stream.send('stdout', line(0));
      await nextTurn();
      assert.equal(res.calls.length, 2, 'first write went out');
      for (let i = 1; i <= 10; i++) stream.send('stdout', line(i));
      await nextTurn();
      assert.equal(res.calls.length, 2, 'nothing written before drain');
      res.accepts = true;
      res.emit('drain');
      const held = [1, 2, 3].map((i) => frameEvent('stdout', line(i))).join('');
      const note = frameEvent('stderr', {
        data: droppedNote(
          7,
          [4, 5, 6, 7, 8, 9, 10].reduce((n, i) => n + sizeOf(i), 0),
        ),
      });
      assert.deepEqual(res.calls.slice(2), [`write ${held}${note}`]);
      stream.send('stdout', line(11));
      stream.end('done', { success: true });
      assert.deepEqual(res.calls.slice(3), [`end ${frameEvent('stdout', line(11))}${done}`]);
    });

    it('calls onStall once the client read nothing for stallMs, with a note, and never drops the end', async () => {
      let stalls = 0;
      const { res, stream } = open({ holdChars: 1, stallMs: 30, onStall: () => stalls++ });
      res.accepts = false;
      stream.send('stdout', line(0));
      await nextTurn();
      stream.send('stdout', line(1));
      await sleep(60);
      assert.equal(stalls, 1);
      stream.end('done', { success: false });
      const note = frameEvent('stderr', { data: stalledNote(30) });
      const dropped = frameEvent('stderr', { data: droppedNote(1, sizeOf(1)) });
      assert.deepEqual(res.calls.slice(2), [`end ${note}${dropped}${frameEvent('done', { success: false })}`]);
    });

    it('does not call onStall when the client drains in time', async () => {
      let stalls = 0;
      const { res, stream } = open({ holdChars: 1000, stallMs: 30, onStall: () => stalls++ });
      res.accepts = false;
      stream.send('stdout', line(0));
      await nextTurn();
      res.emit('drain');
      await sleep(60);
      stream.end();
      assert.equal(stalls, 0);
    });
  });
});
