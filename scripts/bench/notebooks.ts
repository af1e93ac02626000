/** Generated nbformat 4.5 notebooks for the benchmark. */
import * as fs from 'node:fs';

interface NbCell {
  cell_type: 'code' | 'markdown';
  id: string;
  metadata: Record<string, never>;
  source: string[];
  execution_count?: number | null;
  outputs?: unknown[];
}

const lines = (text: string) => text.split(/(?<=\n)/);

/**
 * A notebook of `count` cells shaped like a worked-on analysis: every tenth cell a markdown
 * heading, the others three lines of code that ran once and printed one line.
 */
export function makeNotebook(count: number): object {
  const cells: NbCell[] = [];
  for (let i = 0; i < count; i++) {
    const id = `b${i.toString(36).padStart(6, '0')}`;
    if (i % 10 === 0) {
      cells.push({ cell_type: 'markdown', id, metadata: {}, source: lines(`## Section ${i / 10}\nNotes on step ${i}.`) });
      continue;
    }
    cells.push({
      cell_type: 'code',
      id,
      metadata: {},
      execution_count: i,
      source: lines(`# step ${i}\nvalue_${i} = sum(range(${i}))\nprint(f"value_${i} = {value_${i}}")`),
      outputs: [{ output_type: 'stream', name: 'stdout', text: [`value_${i} = ${(i * (i - 1)) / 2}\n`] }],
    });
  }
  return {
    cells,
    metadata: {
      kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
      language_info: { name: 'python' },
    },
    nbformat: 4,
    nbformat_minor: 5,
  };
}

export function writeNotebook(file: string, count: number): void {
  fs.writeFileSync(file, JSON.stringify(makeNotebook(count), null, 1) + '\n');
}
