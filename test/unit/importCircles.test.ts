import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as ts from 'typescript';

const SRC = path.resolve(__dirname, '../../src');

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
    );
}

/** The files of src/ a file imports, type-only imports and re-exports included. */
function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  return importedFiles
    .map((i) => i.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => path.resolve(path.dirname(file), spec))
    .map((base) => [`${base}.ts`, path.join(base, 'index.ts')].find((f) => fs.existsSync(f)))
    .filter((f): f is string => f !== undefined);
}

/** Strongly connected groups of more than one file (or a file importing itself): Tarjan's algorithm. */
export function importCircles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1 || (graph.get(v) ?? []).includes(v)) circles.push(group.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return circles;
}

describe('import circles', () => {
  it('finds a circle through a type-only import, and none in a chain', () => {
    assert.deepEqual(
      importCircles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
      [['a', 'b', 'c']],
    );
    assert.deepEqual(
      importCircles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
      [],
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circles-'));
    fs.writeFileSync(path.join(dir, 'x.ts'), "import type { Y } from './y';\nexport type X = Y;\n");
    fs.writeFileSync(path.join(dir, 'y.ts'), "export type { X as Y } from './x';\n");
    const files = [path.join(dir, 'x.ts'), path.join(dir, 'y.ts')];
    assert.equal(importCircles(new Map(files.map((f) => [f, importsOf(f)]))).length, 1);
    fs.rmSync(dir, { recursive: true });
  });

  it('src/ has no import circle, type-only imports included', () => {
    const graph = new Map(sourceFiles(SRC).map((f) => [f, importsOf(f)]));
    const circles = importCircles(graph).map((g) => g.map((f) => path.relative(SRC, f)).join(' ↔ '));
    assert.deepEqual(circles, [], `files of src/ that import each other:\n${circles.join('\n')}`);
  });
});
