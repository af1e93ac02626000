import { strict as assert } from 'node:assert';
import type { CellView, OutputItemView } from '../../src/core/model/cellService';
import {
  cellAt,
  cutMiddle,
  htmlText,
  SUMMARY_LINES,
  tableShape,
  type OutputItemSummary,
} from '../../src/core/outputs/outputDetail';

/** pandas' HTML for a DataFrame, as `_repr_html_` writes it (its <style> first). */
function pandasHtml(rows: number, shown = rows): string {
  const body = Array.from(
    { length: shown },
    (_, i) => `    <tr>\n      <th>${i}</th>\n      <td>${i}</td>\n      <td>x${i}</td>\n    </tr>\n`,
  ).join('');
  return (
    '<div>\n<style scoped>\n    .dataframe tbody tr th:only-of-type {\n        vertical-align: middle;\n    }\n</style>\n' +
    '<table border="1" class="dataframe">\n  <thead>\n    <tr style="text-align: right;">\n      <th></th>\n      <th>a</th>\n      <th>b</th>\n    </tr>\n  </thead>\n' +
    `  <tbody>\n${body}  </tbody>\n</table>\n${rows > shown ? `<p>${rows} rows × 2 columns</p>\n` : ''}</div>`
  );
}
const pandasText = (rows: number) => ['   a    b', ...Array.from({ length: rows }, (_, i) => `${i}  ${i}  x${i}`)].join('\n');

const text = (type: string, t: string): OutputItemView => ({ type, text: t, bytes: Buffer.byteLength(t) });
const cell = (items: OutputItemView[]): CellView => ({
  id: 'c1',
  index: 0,
  kind: 'code',
  language: 'python',
  code: 'df',
  version: 1,
  metadata: {},
  tags: [],
  execution: null,
  outputs: [{ items }],
});
const summaryOf = (items: OutputItemView[]) => cellAt(cell(items), 'summary').outputs![0]!.items as OutputItemSummary[];

describe('output summaries', () => {
  it('a DataFrame (text/plain beside text/html): the plain text, 10 rows whole, its shape; the HTML only by size', () => {
    const html = text('text/html', pandasHtml(10));
    const [h, p] = summaryOf([html, text('text/plain', pandasText(10))]);
    assert.deepEqual(h, { type: 'text/html', bytes: html.bytes });
    assert.equal(p!.text, pandasText(10));
    assert.equal(p!.lines, undefined);
    assert.deepEqual(p!.shape, [10, 2]);
  });

  it('a long DataFrame: 15 lines, cut at the middle with a line count, the shape from pandas\u2019 own line', () => {
    const plain = `${pandasText(60)}\n\n[5000 rows x 2 columns]`;
    const [, p] = summaryOf([text('text/html', pandasHtml(5000, 60)), text('text/plain', plain)]);
    const lines = p!.text!.split('\n');
    assert.equal(lines.length, SUMMARY_LINES);
    assert.equal(lines[0], '   a    b');
    assert.equal(lines[7], '[... 49 lines cut ...]');
    assert.equal(lines[14], '[5000 rows x 2 columns]');
    assert.equal(p!.lines, 63);
    assert.deepEqual(p!.shape, [5000, 2]);
  });

  it('HTML alone: its text without <style>, <script> or tags, and the shape of the table it shows', () => {
    const html = `<script>alert(1)</script>${pandasHtml(3)}`;
    const [h] = summaryOf([text('text/html', html)]);
    assert.equal(h!.text, 'a b\n0 0 x0\n1 1 x1\n2 2 x2');
    assert.deepEqual(h!.shape, [3, 2]);
    assert.ok(!/style|script|vertical-align|</.test(h!.text!), h!.text);
  });

  it('a cut pandas table is counted from its own line only (a cut body cannot be counted)', () => {
    assert.deepEqual(tableShape({ ...text('text/html', pandasHtml(5000, 4)), truncated: true }), [5000, 2]);
    assert.equal(tableShape({ ...text('text/html', pandasHtml(4)), truncated: true }), undefined);
    assert.deepEqual(tableShape(text('text/plain', 'shape: (5, 3)\n┌─────┐')), [5, 3]);
  });

  it('a stream of 300 lines keeps its first and last 7 lines; a long single line its head and tail', () => {
    const printed = Array.from({ length: 300 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const [s] = summaryOf([text('stdout', printed)]);
    assert.match(s!.text!, /^line 0\nline 1\n[\s\S]*line 6\n\[\.\.\. 286 lines cut \.\.\.\]\nline 293\n[\s\S]*line 299$/);
    assert.equal(s!.lines, 300);
    const long = cutMiddle('y'.repeat(10_000));
    assert.match(long.text, /^y{1000}\n\[\.\.\. 8000 characters cut \.\.\.\]\ny{1000}$/);
  });

  it('entities are decoded once, numeric ones too; text outside tags is kept', () => {
    assert.equal(htmlText('<p>a &amp;lt; b &#215; c &#x41;</p><br>d'), 'a &lt; b × c A\nd');
  });

  it('`full` and `none` are unchanged', () => {
    const view = cell([text('text/html', pandasHtml(3)), text('text/plain', pandasText(3))]);
    assert.equal(cellAt(view, 'full'), view);
    assert.equal('outputs' in cellAt(view, 'none'), false);
  });
});
