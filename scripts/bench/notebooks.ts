/** Generated nbformat 4.5 notebooks for the benchmark. */
import * as fs from 'node:fs';

const lines = (text: string) => text.split(/(?<=\n)/);

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
  const metadata = {
    kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
    language_info: { name: 'python' },
  };
  fs.writeFileSync(file, `${JSON.stringify({ cells, metadata, nbformat: 4, nbformat_minor: 5 }, null, 1)}\n`);
}
