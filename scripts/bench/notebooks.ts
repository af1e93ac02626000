/** Generated nbformat 4.5 notebooks for the benchmark. */
import * as fs from 'node:fs';

const lines = (text: string) => text.split(/(?<=\n)/);

function save(file: string, cells: unknown[]): void {
  const metadata = {
    kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
    language_info: { name: 'python' },
  };
  fs.writeFileSync(file, `${JSON.stringify({ cells, metadata, nbformat: 4, nbformat_minor: 5 }, null, 1)}\n`);
}

/**
 * `count` cells shaped like a worked-on analysis (every tenth a markdown heading, the others three
 * lines of code that ran once and printed a line), or, when `trivial`, `count` code cells `x = 1`.
 */
export function writeNotebook(file: string, count: number, trivial = false): void {
  const cells = Array.from({ length: count }, (_, i) => {
    const id = `b${i.toString(36).padStart(6, '0')}`;
    if (trivial) return { cell_type: 'code', id, metadata: {}, execution_count: null, source: ['x = 1'], outputs: [] };
    if (i % 10 === 0)
      return { cell_type: 'markdown', id, metadata: {}, source: lines(`## Section ${i / 10}\nNotes on step ${i}.`) };
    return {
      cell_type: 'code',
      id,
      metadata: {},
      execution_count: i,
      source: lines(`# step ${i}\nvalue_${i} = sum(range(${i}))\nprint(f"value_${i} = {value_${i}}")`),
      outputs: [{ output_type: 'stream', name: 'stdout', text: [`value_${i} = ${(i * (i - 1)) / 2}\n`] }],
    };
  });
  save(file, cells);
}

interface NbCell {
  cell_type: string;
  source: string[];
}

/**
 * The marimo notebook with the same cells as the .ipynb `from`: code cells as they are, markdown
 * cells as `mo.md(...)` (marimo's own form, importing marimo under a cell-private name).
 */
export function writeMarimoTwin(from: string, file: string): void {
  const { cells } = JSON.parse(fs.readFileSync(from, 'utf8')) as { cells: NbCell[] };
  const body = (c: NbCell) => {
    const src = c.source.join('');
    return c.cell_type === 'markdown' ? `import marimo as _mo\n_mo.md(${JSON.stringify(src)})` : src;
  };
  const indent = (src: string) =>
    src
      .split('\n')
      .map((l) => (l ? `    ${l}` : l))
      .join('\n');
  const defs = cells.map((c) => `@app.cell\ndef _():\n${indent(body(c))}\n    return\n`).join('\n\n');
  fs.writeFileSync(file, `import marimo\n\napp = marimo.App()\n\n\n${defs}\n\nif __name__ == "__main__":\n    app.run()\n`);
}

/** A notebook of the given code cells, nothing run yet. */
export function writeCodeNotebook(file: string, sources: readonly string[]): void {
  const cells = sources.map((s, i) => ({
    cell_type: 'code',
    id: `m${i}`,
    metadata: {},
    execution_count: null,
    source: lines(s),
    outputs: [],
  }));
  save(file, cells);
}
