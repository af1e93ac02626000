import { strict as assert } from 'node:assert';
import type * as vscode from 'vscode';
import { ShownOutputs } from '../../src/kernels/builtin/shownOutputs';

// Plain stand-ins for VS Code's output classes: ShownOutputs reads only `mime`, `data` and `items`.
const item = (mime: string, text: string) => ({ mime, data: new TextEncoder().encode(text) }) as vscode.NotebookCellOutputItem;
const output = (...items: vscode.NotebookCellOutputItem[]) => ({ items, metadata: {} }) as unknown as vscode.NotebookCellOutput;
const texts = (shown: ShownOutputs) =>
  shown.list().map((o) => o.items.map((i) => `${i.mime}:${new TextDecoder().decode(i.data)}`));

describe('outputs a cell execution told the editor to show', () => {
  it('keeps outputs in order, with stream chunks as items of their output', () => {
    const shown = new ShownOutputs();
    const stdout = output(item('stdout', 'a'));
    shown.append([stdout]);
    shown.appendItems(item('stdout', 'b'), stdout);
    shown.append([output(item('text/plain', '42'), item('text/html', '<b>42</b>'))]);
    assert.deepEqual(texts(shown), [
      ['stdout:a', 'stdout:b'],
      ['text/plain:42', 'text/html:<b>42</b>'],
    ]);
  });

  it('forgets everything when cleared (a new run starts)', () => {
    const shown = new ShownOutputs();
    shown.append([output(item('stdout', 'old'))]);
    shown.clear();
    shown.append([output(item('stderr', 'new'))]);
    assert.deepEqual(texts(shown), [['stderr:new']]);
  });

  it('hands out copies: later appends do not change a list already reported', () => {
    const shown = new ShownOutputs();
    const stdout = output(item('stdout', 'a'));
    shown.append([stdout]);
    const reported = shown.list();
    shown.appendItems(item('stdout', 'b'), stdout);
    assert.equal(reported[0]!.items.length, 1);
  });
});
