/**
 * Dependencies between a notebook's Python cells and which of them are stale, from each cell's
 * definitions and references (kernel_inspect.py's analysis, Python's own parser) and its runs.
 * A cell depends on the nearest cell above it that defines a name it uses. It is stale when it
 * ran and since then: its own code changed, a cell it depends on re-ran or is stale itself
 * (edited since its run, or stale in turn), or a cell it depends on never ran.
 */
import type { CellAnalysis } from './codeChecks';

export interface GraphCell {
  readonly id: string;
  /** Python code cells only take part; others are passed through with no edges. */
  readonly python: boolean;
  /** When its last run ended (ms since the epoch); null: never ran (or its outputs were cleared). */
  readonly endedAt: number | null;
  /** Its code changed since its last run started. */
  readonly editedSinceRun: boolean;
}

export interface CellDependencies {
  readonly dependsOn: string[];
  readonly dependents: string[];
  /** Why the cell's outputs are out of date; null when they are not (or it never ran). */
  readonly stale: { readonly reason: string } | null;
}

export function cellGraph(
  cells: readonly GraphCell[],
  analyses: ReadonlyMap<string, CellAnalysis>,
): Map<string, CellDependencies> {
  const graph = new Map<string, { dependsOn: Map<string, string[]>; dependents: string[]; stale: { reason: string } | null }>();
  const definedAbove = new Map<string, string>(); // name -> nearest defining cell so far
  const index = new Map(cells.map((c, i) => [c.id, i]));
  for (const cell of cells) {
    const analysis = cell.python ? analyses.get(cell.id) : undefined;
    const dependsOn = new Map<string, string[]>();
    for (const name of analysis?.uses ?? []) {
      const from = definedAbove.get(name);
      if (from !== undefined && from !== cell.id) dependsOn.set(from, [...(dependsOn.get(from) ?? []), name]);
    }
    for (const name of analysis?.defines ?? []) definedAbove.set(name, cell.id);
    graph.set(cell.id, { dependsOn, dependents: [], stale: null });
  }
  const byId = new Map(cells.map((c) => [c.id, c]));
  const label = (id: string) => `cell ${id} (index ${index.get(id)})`;
  for (const cell of cells) {
    const entry = graph.get(cell.id)!;
    for (const up of entry.dependsOn.keys()) graph.get(up)!.dependents.push(cell.id);
    if (cell.endedAt === null) continue;
    if (cell.editedSinceRun) {
      entry.stale = { reason: 'its code was edited after it last ran' };
      continue;
    }
    for (const [up, names] of entry.dependsOn) {
      const upstream = byId.get(up)!;
      const what = `${label(up)}, which defines ${names.join(', ')}`;
      if (upstream.endedAt === null) entry.stale = { reason: `it needs ${what}, and that cell never ran` };
      else if (upstream.endedAt > cell.endedAt) entry.stale = { reason: `${what}, ran again after this cell last ran` };
      else if (graph.get(up)!.stale) entry.stale = { reason: `${what}, is stale (${graph.get(up)!.stale!.reason})` };
      if (entry.stale) break;
    }
  }
  return new Map(
    [...graph].map(([id, e]) => [id, { dependsOn: [...e.dependsOn.keys()], dependents: e.dependents, stale: e.stale }]),
  );
}

/** What "run stale" runs, in notebook order: every stale cell, or `from` and the cells downstream of it that ever ran. */
export function staleRunOrder(
  cells: readonly GraphCell[],
  graph: ReadonlyMap<string, CellDependencies>,
  from?: string,
): string[] {
  if (from === undefined) return cells.filter((c) => graph.get(c.id)?.stale).map((c) => c.id);
  const chosen = new Set([from]);
  const ran = new Map(cells.map((c) => [c.id, c.endedAt !== null]));
  for (const cell of cells) {
    if (chosen.has(cell.id)) continue;
    const deps = graph.get(cell.id)?.dependsOn ?? [];
    if (ran.get(cell.id) && deps.some((d) => chosen.has(d))) chosen.add(cell.id);
  }
  return cells.filter((c) => chosen.has(c.id)).map((c) => c.id);
}
