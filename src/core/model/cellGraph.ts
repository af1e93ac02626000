/**
 * Dependencies between a notebook's Python cells and which of them are stale.
 *
 * A cell reads names and writes them: it binds a name, or changes it in place (`df['c'] = …`,
 * `lst.append(x)`, `df.drop(…, inplace=True)`, `del d[k]`, `x += 1`), and each write is a new
 * version of the name. A cell depends on the latest cell above it that wrote a name it reads and,
 * when that write read the name too (a change in place, `x += 1`), on the writer before it, back
 * to a plain binding. What a cell reads and writes comes from its last run where the kernel
 * recorded it (the builtin kernel: the names its run reached, and the globals it left changed),
 * else from its code (kernel_inspect.py's analysis). marimo binds each name in one cell wherever
 * it stands: there a reader depends on that cell, and on the cells above it that change the name.
 *
 * A cell is stale when it ran in the notebook's current kernel and since then its code changed, a
 * cell it depends on ran again or is stale, or a cell it depends on has not run in this kernel.
 * A cell that has not run in this kernel is never stale: its outputs are from an earlier kernel.
 */
import type { CellAnalysis } from './codeChecks';

/** What a cell's run read and left changed, as the kernel recorded it (names of its globals). */
export interface RunDataflow {
  readonly reads: readonly string[];
  /** Bound, rebound or deleted. */
  readonly defines: readonly string[];
  /** The same object, changed. */
  readonly mutates: readonly string[];
}

export interface GraphCell {
  readonly id: string;
  /** Python code cells only take part; others are passed through with no edges. */
  readonly python: boolean;
  /** When its last run in the notebook's current kernel ended (ms since the epoch); null: none. */
  readonly endedAt: number | null;
  /** Its code changed since its last run started. */
  readonly editedSinceRun: boolean;
  /** What that run read and changed, where the kernel recorded it. */
  readonly run?: RunDataflow | undefined;
}

/** Where a fact about a cell comes from: its last run (the kernel's record) or its code. */
export type FactSource = 'run' | 'code';

/**
 * Where a cell's dependencies come from, what it reads and what it changes in place (what it
 * binds is plain in its code); an empty list is left out: answers list many cells.
 */
export interface CellDataflow {
  readonly from: FactSource;
  readonly reads?: readonly string[];
  /** Names whose object it changes in place. */
  readonly changes?: readonly string[];
}

export interface CellDependencies {
  readonly dependsOn: string[];
  readonly dependents: string[];
  /** Why the cell's outputs are out of date; null when they are not (or it has not run in this kernel). */
  readonly stale: { readonly reason: string; readonly from: FactSource } | null;
  /** What the cell reads and writes, as its dependencies were worked out. */
  readonly dataflow?: CellDataflow;
}

/** A cell an action left stale, as answers name it. */
export interface StaleCell {
  readonly id: string;
  readonly index: number;
  readonly reason: string;
}

export interface GraphOptions {
  /** marimo: each name is bound by one cell, wherever it stands in the notebook. */
  readonly boundAnywhere?: boolean;
}

interface Write {
  readonly inPlace: boolean;
  readonly how: string | undefined;
  /** Only by a method called on the name itself: a module's function when the name is a module (`np.append(a, 1)`). */
  readonly method: boolean;
}

interface Flow {
  readonly from: FactSource;
  readonly reads: readonly string[];
  readonly writes: ReadonlyMap<string, Write>;
  readonly imports: readonly string[];
  /** As answers show it (shared by every answer that shows this flow: read, never changed). */
  readonly dataflow: CellDataflow;
}

interface Version {
  readonly cell: string;
  readonly name: string;
  readonly write: Write;
  /** The write read the name too: the version before it still counts. */
  readonly reads: boolean;
  readonly imported: boolean;
  /** As a reason names it ("defines x", "changes x in place (x.append(…))"), made when first needed. */
  what?: string;
}

/**
 * Flows made, by the analysis they were made from and the run record they used: a notebook's
 * graph is worked out again for every edit and list, and its analyses (kept by their text,
 * pythonAnalyzer.ts) and run records are mostly the same objects as the last time.
 */
const flowsMade = new WeakMap<CellAnalysis, { run: RunDataflow | undefined; flow: Flow }>();

/** What one cell of `cells` reads and writes: from its run when recorded for its current code, else from its code. */
function flowOf(cell: GraphCell, analysis: CellAnalysis | undefined): Flow | undefined {
  if (!cell.python || !analysis || analysis.error) return undefined;
  const run = cell.endedAt !== null && !cell.editedSinceRun ? cell.run : undefined;
  const made = flowsMade.get(analysis);
  if (made && made.run === run) return made.flow;
  const forms = analysis.mutates ?? [];
  const form = (name: string) => (forms.length ? forms.find((m) => m.name === name) : undefined);
  const writes = new Map<string, Write>();
  for (const name of run?.defines ?? analysis.defines ?? [])
    writes.set(name, { inPlace: false, how: form(name)?.how, method: false });
  for (const name of run?.mutates ?? forms.map((m) => m.name)) {
    if (writes.has(name)) continue;
    const found = form(name);
    writes.set(name, { inPlace: true, how: found?.how, method: !run && found?.method === true });
  }
  const from: FactSource = run ? 'run' : 'code';
  const reads = run?.reads ?? analysis.uses ?? [];
  const flow = { from, reads, writes, imports: analysis.imports ?? [], dataflow: dataflowOf(from, reads, writes) };
  flowsMade.set(analysis, { run, flow });
  return flow;
}

function describe(v: Version): string {
  const { name, write: w } = v;
  if (w.inPlace) return `changes ${name} in place${w.how ? ` (${w.how})` : ''}`;
  return w.how ? `changes ${name} (${w.how})` : `defines ${name}`;
}

interface Entry {
  readonly cell: GraphCell;
  readonly index: number;
  readonly flow: Flow | undefined;
  /** Upstream cells, in the order found, and what each wrote that this cell reads (a cell has few: arrays cost less than a map). */
  readonly dependsOn: string[];
  readonly what: string[][];
  readonly dependents: string[];
  stale: { reason: string; from: FactSource } | null;
  /** The first cause of a staleness that came down the graph: "cell a (index 0): its code was edited…". */
  cause: string;
}

/** `entry` depends on version `v` of a name (a cell does not depend on itself). */
function link(entry: Entry, v: Version): void {
  if (v.cell === entry.cell.id) return;
  const what = (v.what ??= describe(v));
  const at = entry.dependsOn.indexOf(v.cell);
  if (at < 0) {
    entry.dependsOn.push(v.cell);
    entry.what.push([what]);
  } else if (!entry.what[at]!.includes(what)) entry.what[at]!.push(what);
}

export function cellGraph(
  cells: readonly GraphCell[],
  analyses: ReadonlyMap<string, CellAnalysis>,
  options: GraphOptions = {},
): Map<string, CellDependencies> {
  const graph = new Map<string, Entry>();
  for (let index = 0; index < cells.length; index++) {
    const cell = cells[index]!;
    graph.set(cell.id, {
      cell,
      index,
      flow: flowOf(cell, analyses.get(cell.id)),
      dependsOn: [],
      what: [],
      dependents: [],
      stale: null,
      cause: '',
    });
  }
  const label = (id: string) => `cell ${id} (index ${graph.get(id)!.index})`;
  // marimo: the one cell binding each name, wherever it is.
  const binder = new Map<string, Version>();
  if (options.boundAnywhere)
    for (const { cell, flow } of graph.values())
      for (const [name, write] of flow?.writes ?? [])
        if (!write.inPlace && !binder.has(name))
          binder.set(name, { cell: cell.id, name, write, reads: false, imported: flow!.imports.includes(name) });

  const versions = new Map<string, Version[]>(); // name -> its versions so far, in notebook order
  for (const entry of graph.values()) {
    const { cell, flow } = entry;
    if (!flow) continue;
    for (const name of flow.reads) {
      const list = versions.get(name);
      let i = (list?.length ?? 0) - 1;
      for (; i >= 0; i--) {
        link(entry, list![i]!);
        if (!list![i]!.reads) break;
      }
      const bound = i < 0 ? binder.get(name) : undefined;
      if (bound) link(entry, bound);
    }
    for (const [name, write] of flow.writes) {
      const list = versions.get(name);
      const latest = list?.[list.length - 1] ?? binder.get(name);
      if (write.method && latest?.imported) continue; // `np.append(a, 1)` calls a module's function
      const version: Version = {
        cell: cell.id,
        name,
        write,
        reads: write.inPlace || flow.reads.includes(name),
        imported: !write.inPlace && flow.imports.includes(name),
      };
      if (list) list.push(version);
      else versions.set(name, [version]);
    }
  }

  for (const entry of graph.values()) {
    const { cell } = entry;
    for (const up of entry.dependsOn) graph.get(up)!.dependents.push(cell.id);
    if (cell.endedAt === null) continue;
    if (cell.editedSinceRun) {
      entry.stale = { reason: 'its code was edited after it last ran', from: 'code' };
      entry.cause = `${label(cell.id)}: its code was edited after it last ran`;
      continue;
    }
    for (let k = 0; k < entry.dependsOn.length; k++) {
      const up = entry.dependsOn[k]!;
      const above = graph.get(up)!;
      const upstream = above.cell;
      const why =
        upstream.endedAt === null ? 'not run' : upstream.endedAt > cell.endedAt ? 'ran again' : above.stale ? 'stale' : undefined;
      if (!why) continue;
      const what = `${label(up)}, which ${entry.what[k]!.join(', ')}`;
      const from: FactSource = entry.flow?.from === 'run' && above.flow?.from === 'run' ? 'run' : 'code';
      if (why === 'not run') {
        entry.stale = { reason: `it needs ${what}, and that cell has not run in this kernel`, from };
        entry.cause = `${label(cell.id)}: it needs ${label(up)}, which has not run in this kernel`;
      } else if (why === 'ran again') {
        entry.stale = { reason: `${what}, ran again after this cell last ran`, from };
        entry.cause = `${label(up)} ran again after ${label(cell.id)}`;
      } else {
        entry.stale = { reason: `${what}, is stale (${above.cause})`, from };
        entry.cause = above.cause;
      }
      break;
    }
  }
  const answer = new Map<string, CellDependencies>();
  for (const [id, { flow, dependsOn, dependents, stale }] of graph)
    answer.set(id, flow ? { dependsOn, dependents, stale, dataflow: flow.dataflow } : { dependsOn, dependents, stale });
  return answer;
}

function dataflowOf(from: FactSource, reads: readonly string[], writes: ReadonlyMap<string, Write>): CellDataflow {
  const changes: string[] = [];
  for (const [name, write] of writes) if (write.inPlace) changes.push(name);
  return {
    from,
    ...(reads.length && { reads: [...reads].sort() }),
    ...(changes.length && { changes }),
  };
}

/**
 * What "run stale" runs, in notebook order: every stale cell, or `from` and the cells downstream
 * of it that ran in this kernel; `needs`: the cells those read from that have not run in this
 * kernel (and the ones those need), which a run of them alone would miss: `rebuild` runs them too.
 * `detail` says it in a sentence (`label`: the notebook's).
 */
export function stalePlan(
  cells: readonly GraphCell[],
  graph: ReadonlyMap<string, CellDependencies>,
  options: { from?: string | undefined; rebuild?: boolean | undefined; label?: string } = {},
): { order: string[]; needs: StaleCell[]; detail: string } {
  const { from, rebuild, label = 'the notebook' } = options;
  const chosen = new Set<string>();
  if (from === undefined) for (const c of cells) if (graph.get(c.id)?.stale) chosen.add(c.id);
  if (from !== undefined) {
    chosen.add(from);
    for (const cell of cells) {
      if (chosen.has(cell.id) || cell.endedAt === null) continue;
      if ((graph.get(cell.id)?.dependsOn ?? []).some((d) => chosen.has(d))) chosen.add(cell.id);
    }
  }
  const notRun = new Set(cells.filter((c) => c.endedAt === null).map((c) => c.id));
  const needed = new Set<string>();
  const visit = [...chosen];
  while (visit.length) {
    for (const up of graph.get(visit.pop()!)?.dependsOn ?? [])
      if (notRun.has(up) && !chosen.has(up) && !needed.has(up)) {
        needed.add(up);
        visit.push(up);
      }
  }
  const run = rebuild ? new Set([...chosen, ...needed]) : chosen;
  const needs = cells.flatMap((c, index) => {
    if (!needed.has(c.id)) return [];
    const readers = graph.get(c.id)!.dependents.filter((d) => run.has(d) || needed.has(d));
    return [{ id: c.id, index, reason: `it has not run in this kernel, and ${readers.join(', ')} read from it` }];
  });
  const ids = needs.map((n) => n.id);
  const runs = `${chosen.size} stale cell${chosen.size === 1 ? '' : 's'}${rebuild && ids.length ? ` and ${ids.length} they need` : ''}`;
  const them = ids.length === 1 ? 'it' : 'them';
  const detail = !run.size
    ? `Nothing is stale in ${label}`
    : ids.length && !rebuild
      ? `Runs ${runs}; they read from ${ids.join(', ')}, not run in this kernel: pass "rebuild": true to run ${them} first`
      : `Runs ${runs}, in notebook order`;
  return { order: cells.filter((c) => run.has(c.id)).map((c) => c.id), needs, detail };
}

/** The stale cells among `changed` and the cells downstream of them, in notebook order: what changing or running `changed` left out of date. */
export function staleDownstream(
  cells: readonly { readonly id: string }[],
  graph: ReadonlyMap<string, CellDependencies>,
  changed: Iterable<string>,
): StaleCell[] {
  const reached = new Set<string>();
  const visit = [...changed];
  while (visit.length) {
    const id = visit.pop()!;
    if (reached.has(id)) continue;
    reached.add(id);
    visit.push(...(graph.get(id)?.dependents ?? []));
  }
  return cells.flatMap((c, index) => {
    const stale = reached.has(c.id) ? graph.get(c.id)?.stale : null;
    return stale ? [{ id: c.id, index, reason: stale.reason }] : [];
  });
}
