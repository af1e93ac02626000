/**
 * Checkpoints: every change an agent makes to a notebook (an edit batch over REST or MCP, a
 * code-mode flush) kept as the cells it touched before and after, so the person can keep or
 * revert it and an agent can undo its own. A revert is one batch through the cell rules (one
 * WorkspaceEdit, one undo step) and touches only cells still as the agent left them. No vscode
 * here: the VS Code side stores the list and shows it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { longestIncreasing } from './batch';
import { changeSide } from './changeSides';
import type { BatchOp, CellKind, CellMetadata, CellService, CellSnapshot, CellState, RawOutput } from './cellService';
import { BridgeError } from './bridgeError';

/** A cell as a checkpoint keeps it. `outputs` is a one-line summary; `cut`: code too long to keep whole. */
export interface CellFace {
  readonly index: number;
  readonly kind: CellKind;
  readonly language: string;
  readonly code: string;
  readonly metadata: CellMetadata;
  readonly outputs: string;
  readonly cut?: true;
}

/** One cell of a change: created (no before), deleted (no after), edited or moved. */
export interface CellDelta {
  readonly id: string;
  readonly before: CellFace | null;
  readonly after: CellFace | null;
}

export interface Checkpoint {
  readonly id: number;
  /** The notebook's uri. */
  readonly notebook: string;
  readonly client: string;
  /** Epoch milliseconds. */
  readonly at: number;
  /** "1 added, 2 edited". */
  readonly summary: string;
  readonly cells: readonly CellDelta[];
  /** The person kept it: out of the review list, still known for "who changed it since". */
  kept?: true;
}

/** Who a change is by; null: a change that is not recorded (a revert itself). */
export interface Author {
  readonly client: string;
  readonly action?: number;
}

const authors = new AsyncLocalStorage<Author | null>();

/** Runs `work` with its notebook changes attributed to `author` (null: not recorded). */
export function asAuthor<T>(author: Author | null, work: () => T): T {
  return authors.run(author, work);
}

export const MAX_CHECKPOINTS = 100;
/** Characters of code kept per cell side; longer code is kept cut, and its cell not reverted. */
export const MAX_CODE_CHARS = 100_000;
/** The whole list, as JSON, stays under this; the oldest checkpoints go first. */
export const MAX_STORED_CHARS = 4_000_000;
const UNKNOWN_AUTHOR: Author = { client: 'unknown agent' };
const PERSON = 'the person (or an edit outside the bridge)';

const decoder = new TextDecoder();

/** "2 outputs: text/plain "42"" — what a cell showed, in one line. */
export function outputSummary(outputs: readonly RawOutput[]): string {
  if (!outputs.length) return 'no output';
  const items = outputs.flatMap((o) => o.items);
  const mimes = [...new Set(items.map((i) => i.mime.replace('application/vnd.code.notebook.', '')))];
  const text = items.find((i) => i.mime.startsWith('text/') || i.mime.includes('stdout') || i.mime.includes('error'));
  const first = text
    ? decoder
        .decode(text.data.subarray(0, 400))
        .split('\n')
        .find((l) => l.trim())
    : undefined;
  const head = first ? ` "${first.trim().slice(0, 60)}"` : '';
  return `${outputs.length} output${outputs.length === 1 ? '' : 's'}: ${mimes.join(', ')}${head}`;
}

function face(cell: CellSnapshot, index: number): CellFace {
  const cut = cell.code.length > MAX_CODE_CHARS;
  return {
    index,
    kind: cell.kind,
    language: cell.language,
    code: cut ? cell.code.slice(0, MAX_CODE_CHARS) : cell.code,
    metadata: cell.metadata,
    outputs: outputSummary(cell.outputs),
    ...(cut ? { cut: true as const } : {}),
  };
}

type Content = Pick<CellState, 'code' | 'kind' | 'language' | 'metadata'>;
const sameContent = (a: Content, b: Content) =>
  a.code === b.code &&
  a.kind === b.kind &&
  a.language === b.language &&
  JSON.stringify(a.metadata) === JSON.stringify(b.metadata);

/**
 * The cells a change touched: created, deleted, edited (code, kind, language or metadata), and
 * moved (out of the longest run of cells that kept their relative order).
 */
export function deltasOf(before: readonly CellSnapshot[], after: readonly CellSnapshot[]): CellDelta[] {
  const was = new Map(before.map((c, i) => [c.id, i]));
  const survivors = after.map((c, i) => ({ id: c.id, i })).filter(({ id }) => was.has(id));
  const inPlace = new Set(longestIncreasing(survivors.map(({ id }) => was.get(id)!)).map((k) => survivors[k]!.id));
  const deltas: CellDelta[] = [];
  after.forEach((cell, i) => {
    const old = was.get(cell.id);
    if (old === undefined) deltas.push({ id: cell.id, before: null, after: face(cell, i) });
    else if (!inPlace.has(cell.id) || !sameContent(before[old]!, cell))
      deltas.push({ id: cell.id, before: face(before[old]!, old), after: face(cell, i) });
  });
  const kept = new Set(after.map((c) => c.id));
  before.forEach((cell, i) => kept.has(cell.id) || deltas.push({ id: cell.id, before: face(cell, i), after: null }));
  return deltas;
}

/** What a delta did, in a word. */
export function deltaKind(d: CellDelta): 'added' | 'deleted' | 'edited' | 'moved' {
  if (!d.before) return 'added';
  if (!d.after) return 'deleted';
  return sameContent(d.before, d.after) ? 'moved' : 'edited';
}

/** "1 added, 2 edited, 1 deleted" in that order. */
export function summaryOf(deltas: readonly CellDelta[]): string {
  const counts = new Map<string, number>();
  for (const d of deltas) counts.set(deltaKind(d), (counts.get(deltaKind(d)) ?? 0) + 1);
  return (['added', 'edited', 'deleted', 'moved'] as const)
    .filter((k) => counts.has(k))
    .map((k) => `${counts.get(k)} ${k}`)
    .join(', ');
}

/** A cell a revert leaves alone, and why. */
export interface Skipped {
  readonly id: string;
  /** Its index before the agent's change (deleted cells) or now. */
  readonly index: number;
  /** Who changed it since the agent: another agent's name, or the person. */
  readonly by: string | null;
  readonly why: string;
}

export interface RevertPlan {
  readonly ops: BatchOp[];
  readonly reverted: string[];
  readonly skipped: Skipped[];
}

/**
 * The inverse of a checkpoint (or of `only` some of its cells) against the cells as they are now:
 * created cells deleted, edited cells given their old code back, deleted cells re-created and
 * moved cells put back, each only where the cell is still as the agent left it. `laterBy` names
 * who changed a cell since (else the person did). Writes carry the version read here, so a cell
 * changed between this plan and its apply is refused (409), not overwritten. Cells go back where
 * they were (changeSides.ts): those that move are first moved to the end, then each is placed,
 * in order.
 */
export function planRevert(
  checkpoint: Checkpoint,
  now: readonly CellState[],
  laterBy: (cellId: string) => string | undefined,
  only: readonly CellDelta[] = checkpoint.cells,
): RevertPlan {
  const at = new Map(now.map((c, i) => [c.id, i]));
  const ops: BatchOp[] = [];
  const skipped: Skipped[] = [];
  const skip = (d: CellDelta, why: string, index: number, changed = true) => {
    const by = changed ? (laterBy(d.id) ?? PERSON) : null;
    skipped.push({ id: d.id, index, by, why: changed ? `${why} by ${by}` : why });
  };
  const going: CellDelta[] = [];
  const sim = now.map((c) => c.id);

  for (const d of only) {
    const i = at.get(d.id);
    const cell = i === undefined ? undefined : now[i]!;
    if (!d.after) {
      if (cell) skip(d, 'it was deleted by the agent and is back', i!, false);
      else if (d.before!.cut)
        skip(d, `its code was longer than ${MAX_CODE_CHARS} characters and was not kept whole`, d.before!.index, false);
      else going.push(d);
      continue;
    }
    if (!cell) {
      skip(d, 'it was deleted since', d.after.index);
      continue;
    }
    const asLeft = cell.code === d.after.code && cell.kind === d.after.kind && cell.language === d.after.language;
    if (!d.before) {
      if (!asLeft) skip(d, 'it was changed since', i!);
      else {
        ops.push({ op: 'delete', ref: d.id, version: cell.version });
        sim.splice(sim.indexOf(d.id), 1);
        going.push(d);
      }
      continue;
    }
    const b = d.before;
    const edited = deltaKind(d) === 'edited';
    if (edited && !asLeft) {
      skip(d, 'it was changed since', i!);
      continue;
    }
    if (edited && b.cut) {
      skip(d, `its old code was longer than ${MAX_CODE_CHARS} characters and was not kept whole`, i!, false);
      continue;
    }
    if (edited) {
      const metadata = JSON.stringify(b.metadata) === JSON.stringify(d.after.metadata) ? {} : { metadata: b.metadata };
      ops.push({ op: 'edit', ref: d.id, code: b.code, kind: b.kind, language: b.language, version: cell.version, ...metadata });
    }
    going.push(d);
  }
  const placed = changeSide(
    checkpoint.cells,
    now.map((c) => c.id),
    'before',
    going,
  ).flatMap((c, to) => ('placed' in c && c.placed ? [{ d: going.find((g) => g.id === c.id)!, to }] : []));
  for (const { d } of placed.filter(({ d }) => at.has(d.id))) {
    ops.push({ op: 'move', ref: d.id, to: sim.length - 1 });
    sim.push(...sim.splice(sim.indexOf(d.id), 1));
  }
  for (const { d, to } of placed) {
    const from = sim.indexOf(d.id);
    if (from >= 0) sim.splice(from, 1);
    const where = Math.min(to, sim.length);
    sim.splice(where, 0, d.id);
    const b = d.before!;
    ops.push(
      from >= 0
        ? { op: 'move', ref: d.id, to: where }
        : { op: 'create', index: where, code: b.code, kind: b.kind, language: b.language, metadata: b.metadata },
    );
  }
  return { ops, reverted: going.map((d) => d.id), skipped };
}

/**
 * Whether the notebook is now as the change left it: each cell it touched (of `part`, when given)
 * as the agent left it, where it left it.
 */
export function asTheAgentLeftIt(
  checkpoint: Checkpoint,
  now: readonly CellState[],
  part: readonly CellDelta[] = checkpoint.cells,
): boolean {
  const after = changeSide(
    checkpoint.cells,
    now.map((c) => c.id),
    'after',
    part,
  );
  return (
    after.length === now.length &&
    after.every((c, i) => ('now' in c ? c.now === i : c.id === now[i]!.id && !c.face.cut && sameContent(c.face, now[i]!)))
  );
}

export interface RevertResult {
  readonly checkpoint: number;
  readonly summary: string;
  readonly reverted: string[];
  readonly skipped: Skipped[];
}

/** Where the list is kept between window reloads. */
export interface CheckpointFile {
  load(): Checkpoint[];
  save(checkpoints: readonly Checkpoint[]): void;
}

/**
 * The checkpoints of this window's notebooks, newest last, bounded in count and size. Records
 * every change the cell rules apply (`record`, called by NotebookCells) under the author the
 * transport set with `asAuthor`; reverts and undoes go back through the same cell rules.
 */
export class Checkpoints {
  private readonly list: Checkpoint[];
  private nextId: number;
  private readonly listeners = new Set<() => void>();
  private readonly sizes = new WeakMap<Checkpoint, number>();
  /** Action ids are this window's (they start again at 1 after a reload), so this is not stored. */
  private readonly byAction = new Map<number, number>();

  constructor(
    private readonly cells: () => CellService,
    private readonly file: CheckpointFile,
    private readonly now: () => number = Date.now,
  ) {
    this.list = file.load();
    this.nextId = Math.max(0, ...this.list.map((c) => c.id)) + 1;
  }

  /** Fires when a checkpoint is added, kept or reverted. */
  onDidChange(listener: () => void): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** The checkpoints to review (not kept), newest first. */
  pending(): Checkpoint[] {
    return this.list.filter((c) => !c.kept).reverse();
  }

  get(id: number): Checkpoint | undefined {
    return this.list.find((c) => c.id === id);
  }

  /** The newest checkpoint of an action of this window's activity record. */
  ofAction(action: number): Checkpoint | undefined {
    const id = this.byAction.get(action);
    return id === undefined ? undefined : this.get(id);
  }

  /** Notes a change the cell rules applied to `notebook`. */
  record(notebook: string, before: readonly CellSnapshot[], after: readonly CellSnapshot[]): void {
    const author = authors.getStore();
    if (author === null) return;
    const cells = deltasOf(before, after);
    if (!cells.length) return;
    const { client, action } = author ?? UNKNOWN_AUTHOR;
    const id = this.nextId++;
    this.list.push({ id, notebook, client, at: this.now(), summary: summaryOf(cells), cells });
    if (action !== undefined) this.byAction.set(action, id);
    // Only the newest can still name a kept checkpoint.
    if (this.byAction.size > MAX_CHECKPOINTS) this.byAction.delete(this.byAction.keys().next().value!);
    this.changed();
  }

  keep(id: number): void {
    const checkpoint = this.get(id);
    if (!checkpoint || checkpoint.kept) return;
    checkpoint.kept = true;
    this.changed();
  }

  /**
   * Reverts what it can of one checkpoint (the person's "Revert"), or of one cell of it (the rest
   * of the change stays to review); skipped cells are named.
   */
  async revert(id: number, cellId?: string): Promise<RevertResult> {
    const checkpoint = this.get(id);
    if (!checkpoint)
      throw new BridgeError('not_found', `No change ${id} to revert: it was reverted already, or dropped as the list grew.`);
    const only = cellId === undefined ? undefined : checkpoint.cells.filter((d) => d.id === cellId);
    if (only?.length === 0)
      throw new BridgeError('not_found', `Change ${id} has no cell ${cellId} to revert: it was reverted already.`);
    return this.apply(checkpoint, false, only);
  }

  /** Reverts the changes by `client` at or after `since`, newest first. */
  async revertAllBy(client: string, since: number): Promise<RevertResult[]> {
    const chosen = this.list.filter((c) => c.client === client && c.at >= since).reverse();
    const results: RevertResult[] = [];
    for (const checkpoint of chosen) results.push(await this.apply(checkpoint, false));
    return results;
  }

  /** The undo of the agent making this call (the author its transport set). */
  undoOwn(notebook: string | undefined): Promise<RevertResult> {
    const author = authors.getStore();
    if (!author)
      throw new BridgeError('bad_input', 'Undo takes back the changes of the agent asking, and this request names none.');
    return this.undo(author.client, notebook);
  }

  /**
   * An agent's undo of its own newest change (in `notebook`, when named): all of it or nothing;
   * a 409 naming the cells changed since, and by whom, when it would lose later work.
   */
  async undo(client: string, notebook: string | undefined): Promise<RevertResult> {
    const uri = notebook === undefined ? undefined : (await this.cells().list(notebook)).notebook.uri;
    const checkpoint = this.newest((c) => c.client === client && !c.kept && (uri === undefined || c.notebook === uri));
    if (!checkpoint)
      throw new BridgeError(
        'not_found',
        `${client} has no change left to undo${notebook === undefined ? '' : ` in ${notebook}`}: undo reverts the newest change this client made (edits and code-mode flushes) that is not yet reverted or kept by the person.`,
      );
    return this.apply(checkpoint, true);
  }

  /** Reverts the checkpoint, or `only` some of its cells (the others stay in it, to review). */
  private async apply(checkpoint: Checkpoint, whole: boolean, only?: readonly CellDelta[]): Promise<RevertResult> {
    const cells = this.cells();
    const { cells: now } = await cells.list(checkpoint.notebook);
    const plan = planRevert(checkpoint, now, (id) => this.laterBy(checkpoint, id), only);
    if (whole && plan.skipped.length) {
      throw new BridgeError(
        'stale',
        `Undoing "${checkpoint.summary}" would lose later work: ${plan.skipped.map((s) => `cell ${s.id} (index ${s.index}): ${s.why}`).join('; ')}. Nothing was changed; edit those cells yourself if they should go back.`,
        { skipped: plan.skipped, checkpoint: checkpoint.id },
      );
    }
    if (plan.ops.length) await asAuthor(null, () => cells.batch(checkpoint.notebook, plan.ops, []));
    const rest = only ? checkpoint.cells.filter((d) => !only.includes(d)) : [];
    const at = this.list.indexOf(checkpoint);
    if (at >= 0 && rest.length) this.list[at] = { ...checkpoint, cells: rest, summary: summaryOf(rest) };
    else if (at >= 0) this.list.splice(at, 1);
    this.changed();
    return {
      checkpoint: checkpoint.id,
      summary: only ? summaryOf(only) : checkpoint.summary,
      reverted: plan.reverted,
      skipped: plan.skipped,
    };
  }

  /** The newest agent after `checkpoint` that touched the cell. */
  private laterBy(checkpoint: Checkpoint, cellId: string): string | undefined {
    return this.newest((c) => c.notebook === checkpoint.notebook && c.id > checkpoint.id && c.cells.some((d) => d.id === cellId))
      ?.client;
  }

  private newest(test: (c: Checkpoint) => boolean): Checkpoint | undefined {
    for (let i = this.list.length - 1; i >= 0; i--) if (test(this.list[i]!)) return this.list[i];
    return undefined;
  }

  /** Its size as stored, measured once (an edit loop must not re-measure the whole list). */
  private sizeOf(checkpoint: Checkpoint): number {
    let size = this.sizes.get(checkpoint);
    if (size === undefined) this.sizes.set(checkpoint, (size = JSON.stringify(checkpoint).length));
    return size;
  }

  private changed(): void {
    let total = this.list.reduce((sum, c) => sum + this.sizeOf(c), 0);
    while (this.list.length > MAX_CHECKPOINTS || (total > MAX_STORED_CHARS && this.list.length > 1))
      total -= this.sizeOf(this.list.shift()!);
    this.file.save(this.list);
    for (const listener of this.listeners) listener();
  }
}
