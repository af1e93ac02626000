import { strict as assert } from 'node:assert';
import { ConsoleLines } from '../../src/core/outputs/consoleLines';
import type { StreamEvent } from '../../src/core/model/kernelPort';
import { interpretOutput } from '../../src/core/outputs/extensionOutputs';

const enc = (s: string) => new TextEncoder().encode(s);
const mimes = {
  stdout: 'application/vnd.code.notebook.stdout',
  stderr: 'application/vnd.code.notebook.stderr',
  error: 'application/vnd.code.notebook.error',
};

describe('a run console kept in lines (tracebacks on lines of their own)', () => {
  it("marimo's one-line error message, then its traceback: the traceback starts a line and ends one", () => {
    // What marimo's extension yields for a scratchpad exception: the marimo-error message as a
    // stderr item without a line break, then the traceback as an error item.
    const sent: StreamEvent[] = [];
    const lines = new ConsoleLines((e) => sent.push(e));
    const message = "AttributeError: 'NotebookCell' object has no attribute 'outputs'";
    const stack = `Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n${message}`;
    for (const output of [
      { items: [{ mime: mimes.stderr, data: enc(message) }] },
      { items: [{ mime: mimes.error, data: enc(JSON.stringify({ name: 'AttributeError', message: 'x', stack })) }] },
    ])
      for (const s of interpretOutput(output, mimes).streams)
        if (s.block) lines.block(s.name, s.text);
        else lines.text(s);
    const console = sent.map((e) => e.text).join('');
    assert.equal(console, `${message}\n${stack}\n`);
  });

  it('after a print without a line break on either stream; not after one that ended its line', () => {
    const sent: string[] = [];
    const lines = new ConsoleLines((e) => sent.push(`${e.name}:${e.text}`));
    lines.text({ name: 'stdout', text: 'a' });
    lines.block('stderr', 'Traceback\nValueError: x\n');
    lines.text({ name: 'stdout', text: 'b\n' });
    lines.block('stderr', 'E');
    lines.text({ name: 'stdout', text: '' });
    lines.block('stderr', 'F');
    assert.deepEqual(sent, ['stdout:a', 'stderr:\nTraceback\nValueError: x\n', 'stdout:b\n', 'stderr:E\n', 'stderr:F\n']);
  });
});
