import { strict as assert } from 'node:assert';
import { interpretOutput, plainText, reduceDisplay } from '../../src/core/outputs/extensionOutputs';

const mimes = {
  stdout: 'application/vnd.code.notebook.stdout',
  stderr: 'application/vnd.code.notebook.stderr',
  error: 'application/vnd.code.notebook.error',
};
const bytes = (s: string) => new TextEncoder().encode(s);
const item = (mime: string, data: string) => ({ mime, data: bytes(data) });

describe('extension kernel outputs (marimo / Jupyter API shape)', () => {
  it('maps stdout and stderr items to stream events in order', () => {
    const out = interpretOutput(
      { items: [item(mimes.stdout, 'a\n'), item(mimes.stderr, 'warn\n'), item(mimes.stdout, 'b')] },
      mimes,
    );
    assert.deepEqual(out.streams, [
      { name: 'stdout', text: 'a\n' },
      { name: 'stderr', text: 'warn\n' },
      { name: 'stdout', text: 'b' },
    ]);
    assert.equal(out.failed, false);
    assert.equal(out.value, undefined);
  });

  it('turns an error item into a plain-text traceback on stderr and a failure', () => {
    const stack = '\x1b[31mTraceback (most recent call last)\x1b[0m\n  File "<cell>", line 1\n\x1b[31mValueError\x1b[0m: x';
    const out = interpretOutput(
      { items: [item(mimes.error, JSON.stringify({ name: 'ValueError', message: 'x', stack }))] },
      mimes,
    );
    assert.equal(out.failed, true);
    assert.deepEqual(out.streams, [
      { name: 'stderr', text: 'Traceback (most recent call last)\n  File "<cell>", line 1\nValueError: x', block: true },
    ]);
  });

  it('falls back to name: message when an error has no stack', () => {
    const out = interpretOutput(
      { items: [item(mimes.error, JSON.stringify({ name: 'NameError', message: "name 'y' is not defined" }))] },
      mimes,
    );
    assert.equal(out.streams[0]?.text, "NameError: name 'y' is not defined");
  });

  it("treats marimo's marimo-error channel as failure, with its text on stderr", () => {
    const out = interpretOutput(
      { items: [item('text/html', 'This cell redefines <a href="#">x</a> &amp; y')], metadata: { channel: 'marimo-error' } },
      mimes,
    );
    assert.equal(out.failed, true);
    assert.deepEqual(out.streams, [{ name: 'stderr', text: 'This cell redefines x & y', block: true }]);
  });

  it('collects rich items as the value, binary ones base64', () => {
    const out = interpretOutput(
      { items: [item('text/html', '<b>2</b>'), item('text/plain', '2'), { mime: 'image/png', data: new Uint8Array([1, 2, 3]) }] },
      mimes,
    );
    assert.deepEqual(out.value, { 'text/html': '<b>2</b>', 'text/plain': '2', 'image/png': 'AQID' });
  });

  it("unwraps marimo's renderer payload into the value's own mime", () => {
    const payload = JSON.stringify({
      cellId: 'scratch',
      state: { output: { mimetype: 'text/html', data: "<pre class='text-xs'>2</pre>" } },
    });
    const out = interpretOutput({ items: [item('application/vnd.marimo.ui+json', payload)] }, mimes);
    assert.deepEqual(out.value, { 'text/html': "<pre class='text-xs'>2</pre>" });
  });

  it('keeps tag-like text of a traceback (an error item is only uncoloured)', () => {
    const stack = '  raise ValueError("<b>x</b>")\n\x1b[31mValueError\x1b[0m: <b>x</b>';
    const out = interpretOutput(
      { items: [item(mimes.error, JSON.stringify({ name: 'ValueError', message: '<b>x</b>', stack }))] },
      mimes,
    );
    assert.deepEqual(out.streams, [
      { name: 'stderr', text: '  raise ValueError("<b>x</b>")\nValueError: <b>x</b>', block: true },
    ]);
  });

  it('with a value marker, tells the marked value from displays and drops the marker', () => {
    const marker = 'application/vnd.test.value+json';
    const value = interpretOutput({ items: [item('text/plain', '42'), item(marker, '{}')] }, mimes, { valueMime: marker });
    assert.deepEqual(value.value, { 'text/plain': '42' });
    assert.equal(value.display, undefined);
    const shown = interpretOutput({ items: [item('text/plain', '<HTML>'), item('text/html', '<b>hi</b>')] }, mimes, {
      valueMime: marker,
    });
    assert.deepEqual(shown.display, { 'text/plain': '<HTML>', 'text/html': '<b>hi</b>' });
    assert.equal(shown.value, undefined);
  });

  it('reduces a display to its richest mime', () => {
    assert.deepEqual(reduceDisplay({ 'text/plain': '<Figure>', 'image/png': 'AQID' }), { mimetype: 'image/png', data: 'AQID' });
    assert.deepEqual(reduceDisplay({ 'text/plain': '<HTML>', 'text/html': '<b>hi</b>' }), {
      mimetype: 'text/html',
      data: '<b>hi</b>',
    });
    assert.equal(reduceDisplay({}), undefined);
  });

  it("unwraps the frame links of marimo's tracebacks, keeping the message's own text", () => {
    const stack =
      'Traceback (most recent call last):\n  File <a href="/x/&lt;frozen&gt;.py:3">/x/&lt;frozen&gt;.py:3</a>\x1b[2m, in <module>\x1b[0m\n' +
      '\x1b[1;31mValueError\x1b[0m: no <b>bold</b>';
    const out = interpretOutput(
      { items: [item(mimes.error, JSON.stringify({ name: 'ValueError', message: '', stack }))] },
      mimes,
      {
        linksInErrors: true,
      },
    );
    assert.equal(out.failed, true);
    assert.deepEqual(out.streams, [
      {
        name: 'stderr',
        text: 'Traceback (most recent call last):\n  File "/x/<frozen>.py", line 3, in <module>\nValueError: no <b>bold</b>',
        block: true,
      },
    ]);
  });

  it('strips markup and colour codes for terminals', () => {
    assert.equal(plainText('\x1b[1;31m<span>a &lt; b</span>\x1b[0m'), 'a < b');
    assert.equal(plainText('File "<cell 3>", line 1, in <module>'), 'File "<cell 3>", line 1, in <module>');
  });
});
