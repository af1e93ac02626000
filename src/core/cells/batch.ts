import type {
  BatchOp,
  CellKind,
  CellMetadata,
  CellState,
  CellRef,
  MetadataChange,
  NewCell,
  NotebookChange,
} from '../model/cellService';
import type { WriteGuard } from '../model/versions';
import { BridgeError } from '../bridgeError';
import { personEditingError, type PersonTyping } from '../agents/presence';
import { cellIndexer } from './refs';

/**
 * Most operations one batch may hold: it bounds the body, the planning and the steps the batch is
 * applied in (changeSteps.ts), while the extension host, which every extension in the window
 * shares, keeps answering (the bench measures /health while the largest batch applies).
 */
export const MAX_BATCH_OPS = 1000;

/**
 * A refusal of one op of a batch: `op` is its position in the batch, `reason` the sentence
 * without the op's name, so a caller that names ops its own way (code mode) relabels it
 * without reading the message.
 */
export class OpError extends BridgeError {
  constructor(
    kind: BridgeError['kind'],
    readonly op: number,
    readonly reason: string,
    where: string,
    extra: Record<string, unknown> = {},
  ) {
    super(kind, `${where}${reason}`, extra);
    this.name = 'OpError';
  }
}

export interface PlanOptions {
  /** The notebook's name in messages. */
  notebook: string;
  /** Language of new code cells. */
  defaultLanguage: string;
  newId: () => string;
  /** Why writing this cell would clobber unread changes (409), with the body's extra fields; else undefined. */
  checkWrite: (cell: CellState, index: number, guard: WriteGuard) => { why: string; extra: Record<string, unknown> } | undefined;
  /** Milliseconds since the person typed in the cell, while that makes a write to it wait (presence.ts); else undefined. */
  personTyping?: (cell: CellState) => number | undefined;
  /** How op `i` is named in messages (default `ops.<i>: `). */
  where?: (i: number) => string;
}

export interface PlannedCell {
  readonly id: string;
  readonly kind: CellKind;
  readonly language: string;
  readonly code: string;
  /** Created, edited or moved by the batch. */
  readonly touched: boolean;
}

export interface Plan {
  readonly change: NotebookChange;
  /** The notebook after the batch. */
  readonly layout: readonly PlannedCell[];
  readonly deleted: readonly string[];
  readonly created: readonly string[];
  /** Ids of the created cells the batch named, by name. */
  readonly names: ReadonlyMap<string, string>;
  /** True when applying the change would change nothing. */
  readonly empty: boolean;
  /** Cells the person is typing in that the batch writes anyway, by `force` (the person is told). */
  readonly overTyping: readonly PersonTyping[];
}

interface Entry {
  id: string;
  /** Index in the notebook before the batch; null for a created cell. */
  source: number | null;
  kind: CellKind;
  language: string;
  code: string;
  metadata: CellMetadata;
  touched: boolean;
}

/**
 * Plans a batch against the cells as they are: every ref must resolve (404), no op may use a
 * cell another op deletes and positions must be in range (400), and writes must pass
 * read-before-write (409) — all before anything is applied. Refs (ids or indices) name cells as
 * they were before the batch, or a cell an earlier create op of the batch named (as `before` or
 * `after` only); positions (`index`, `to`) are indices in the notebook as the preceding ops left it. The result is one change: cells that keep their place get their text
 * replaced in place; created, moved and re-kinded cells are inserted as (copies of) cells.
 */
export function planBatch(cells: readonly CellState[], ops: readonly BatchOp[], options: PlanOptions): Plan {
  const where = options.where ?? ((i: number) => `ops.${i}: `);
  const bad = (i: number, reason: string) => new OpError('bad_input', i, reason, where(i));
  const ids = cells.map((c) => c.id);
  const indexOf = cellIndexer(ids, options.notebook);
  // Created cells get their ids up front, so that later ops can name them.
  const newIds = ops.map((op) => (op.op === 'create' ? options.newId() : ''));
  const names = new Map<string, string>();
  const resolve = (ref: CellRef, i: number, field: string): string => {
    const named = typeof ref === 'string' ? names.get(ref) : undefined;
    if (named !== undefined) return named;
    try {
      return ids[indexOf(ref)]!;
    } catch (error) {
      if (error instanceof BridgeError)
        throw new OpError(error.kind, i, `${field ? `${field}: ` : ''}${error.detail}`, where(i), error.extra);
      throw error;
    }
  };

  // Pass 1: refs resolve, and no op uses a cell that another op deletes or edits twice.
  const used: { i: number; ids: string[] }[] = [];
  const deletedBy = new Map<string, number>();
  const editedBy = new Map<string, number>();
  ops.forEach((op, i) => {
    const refs: string[] = [];
    if (op.op !== 'create' && typeof op.ref === 'string' && names.has(op.ref))
      throw bad(
        i,
        `"${op.ref}" is a cell this batch creates: give its code, kind and place in its create op instead of a later ${op.op}`,
      );
    if (op.op !== 'create') refs.push(resolve(op.ref, i, ''));
    if ('before' in op && op.before !== undefined) refs.push(resolve(op.before, i, 'before'));
    if ('after' in op && op.after !== undefined) refs.push(resolve(op.after, i, 'after'));
    const positions = [
      'index' in op ? op.index : undefined,
      'to' in op ? op.to : undefined,
      'before' in op ? op.before : undefined,
      'after' in op ? op.after : undefined,
    ];
    if (positions.filter((p) => p !== undefined).length > 1) {
      throw bad(i, `give at most one of ${op.op === 'move' ? '"to"' : '"index"'}, "before" and "after"`);
    }
    if (op.op === 'move' && positions.every((p) => p === undefined)) throw bad(i, 'give "to", "before" or "after"');
    if (op.op === 'move' && refs.length === 2 && refs[0] === refs[1]) throw bad(i, 'a cell cannot move next to itself');
    if (op.op === 'edit' && [op.code, op.kind, op.language, op.metadata, op.tags].every((v) => v === undefined))
      throw bad(i, 'give what to change: "code", "kind", "language", "metadata" or "tags"');
    if (op.op !== 'delete' && op.op !== 'move' && op.metadata !== undefined && op.tags !== undefined)
      throw bad(i, 'give "metadata" (the whole of it, tags included) or "tags", not both');
    const first = op.op === 'delete' ? deletedBy : op.op === 'edit' ? editedBy : undefined;
    if (first && op.op !== 'create') {
      const id = refs[0]!;
      const earlier = first.get(id);
      if (earlier !== undefined)
        throw bad(
          i,
          `cell ${id} is already ${op.op === 'delete' ? 'deleted' : 'edited'} by ops.${earlier}; one ${op.op} per cell`,
        );
      first.set(id, i);
    }
    used.push({ i, ids: refs });
    if (op.op === 'create' && op.name !== undefined) {
      if (names.has(op.name) || ids.includes(op.name))
        throw bad(i, `name "${op.name}" is already ${names.has(op.name) ? 'given to a cell of this batch' : 'the id of a cell'}`);
      names.set(op.name, newIds[i]!);
    }
  });
  for (const { i, ids: refs } of used) {
    for (const id of refs) {
      const j = deletedBy.get(id);
      if (j !== undefined && j !== i) throw bad(i, `cell ${id} is deleted by ops.${j}; no op may use a cell another op deletes`);
    }
  }

  // Pass 2: play the ops on a working copy; positions are checked as they apply.
  const list: Entry[] = cells.map((c, index) => ({
    id: c.id,
    source: index,
    kind: c.kind,
    language: c.language,
    code: c.code,
    metadata: c.metadata,
    touched: false,
  }));
  const find = (id: string) => list.findIndex((e) => e.id === id);
  const created: string[] = [];
  const writes: { index: number; guard: WriteGuard; op: number }[] = [];
  const position = (
    i: number,
    p: { index?: number | undefined; before?: CellRef | undefined; after?: CellRef | undefined },
    field: string,
    max: number,
  ): number => {
    if (p.before !== undefined) return find(resolve(p.before, i, 'before'));
    if (p.after !== undefined) return find(resolve(p.after, i, 'after')) + 1;
    if (p.index === undefined) return max;
    if (!Number.isInteger(p.index) || p.index < 0 || p.index > max) {
      throw bad(i, `${field} ${p.index} is out of range: it must be between 0 and ${max} at this point of the batch`);
    }
    return p.index;
  };
  ops.forEach((op, i) => {
    switch (op.op) {
      case 'create': {
        const kind = op.kind ?? 'code';
        const at = position(i, op, '"index"', list.length);
        const id = newIds[i]!;
        created.push(id);
        list.splice(at, 0, {
          id,
          source: null,
          kind,
          language: op.language ?? defaultLanguage(kind, options),
          code: op.code ?? '',
          metadata: withMetadata({}, op),
          touched: true,
        });
        return;
      }
      case 'edit': {
        const entry = list[find(resolve(op.ref, i, ''))]!;
        writes.push({ index: entry.source!, guard: op, op: i });
        const kind = op.kind ?? entry.kind;
        entry.language = op.language ?? (kind === entry.kind ? entry.language : defaultLanguage(kind, options));
        entry.kind = kind;
        entry.code = op.code ?? entry.code;
        entry.metadata = withMetadata(entry.metadata, op);
        entry.touched = true;
        return;
      }
      case 'delete': {
        const at = find(resolve(op.ref, i, ''));
        writes.push({ index: list[at]!.source!, guard: op, op: i });
        list.splice(at, 1);
        return;
      }
      case 'move': {
        const at = find(resolve(op.ref, i, ''));
        const [entry] = list.splice(at, 1);
        const to = position(i, { index: op.to, before: op.before, after: op.after }, '"to"', list.length);
        list.splice(to, 0, { ...entry!, touched: true });
        return;
      }
    }
  });
  for (const w of writes) {
    const conflict = options.checkWrite(cells[w.index]!, w.index, w.guard);
    if (conflict) throw new OpError('stale', w.op, conflict.why, where(w.op), conflict.extra);
  }
  // Then the person's cursor: every cell they are typing in is named, and nothing changes.
  const typed = writes.flatMap((w) => {
    const ms = options.personTyping?.(cells[w.index]!);
    return ms === undefined ? [] : [{ op: w.op, id: cells[w.index]!.id, index: w.index, ms, force: w.guard.force === true }];
  });
  const typing = typed.filter((t) => !t.force);
  if (typing.length) {
    const ops = typing.map((t) => where(t.op).replace(/:\s*$/, '')).filter(Boolean);
    throw personEditingError(typing, ops.length ? `${ops.join(', ')}: ` : '');
  }

  const change = toChange(cells, list);
  const kept = new Set(list.map((e) => e.id));
  return {
    change,
    layout: list.map((e) => ({ id: e.id, kind: e.kind, language: e.language, code: e.code, touched: e.touched })),
    deleted: ids.filter((id) => !kept.has(id)),
    created,
    names,
    empty: change.texts.length === 0 && change.metadata.length === 0 && change.splices.length === 0,
    overTyping: typed.map(({ id, index, ms }) => ({ id, index, ms })),
  };
}

/** Metadata after an op: replaced whole, or only its tags (no tags: the key goes). */
function withMetadata(current: CellMetadata, change: MetadataChange): CellMetadata {
  if (change.metadata !== undefined) return change.metadata;
  if (change.tags === undefined) return current;
  const { tags: _old, ...rest } = current;
  return change.tags.length ? { ...rest, tags: [...new Set(change.tags)] } : rest;
}

function defaultLanguage(kind: CellKind, options: PlanOptions): string {
  return kind === 'markup' ? 'markdown' : options.defaultLanguage;
}

/**
 * The least disruptive change from `before` to `after`: the longest run of cells that keep
 * their kind, language and relative order stays in place (text edits only); every gap between
 * two of them is one replacement by the cells that belong there. Indices are those of `before`,
 * as VS Code applies the edits of one WorkspaceEdit against the notebook as it was.
 */
function toChange(before: readonly CellState[], after: readonly Entry[]): NotebookChange {
  const sameShape = (e: Entry) =>
    e.source !== null && before[e.source]!.kind === e.kind && before[e.source]!.language === e.language;
  const candidates = after.map((e, i) => ({ e, i })).filter(({ e }) => sameShape(e));
  const anchored = new Set(longestIncreasing(candidates.map(({ e }) => e.source!)).map((k) => candidates[k]!.i));

  const texts: { index: number; code: string }[] = [];
  const metadata: { index: number; metadata: CellMetadata }[] = [];
  const splices: { start: number; end: number; cells: NewCell[] }[] = [];
  let pending: NewCell[] = [];
  let last = -1;
  const close = (end: number) => {
    if (pending.length || end > last + 1) splices.push({ start: last + 1, end, cells: pending });
    pending = [];
  };
  after.forEach((e, i) => {
    if (anchored.has(i)) {
      close(e.source!);
      last = e.source!;
      if (before[last]!.code !== e.code) texts.push({ index: last, code: e.code });
      if (before[last]!.metadata !== e.metadata) metadata.push({ index: last, metadata: e.metadata });
      return;
    }
    const old = e.source === null ? undefined : before[e.source]!;
    pending.push({
      id: e.id,
      kind: e.kind,
      language: e.language,
      code: e.code,
      metadata: e.metadata,
      version: old ? old.version + (old.code === e.code ? 0 : 1) : 1,
      copyOf: e.source ?? undefined,
    });
  });
  close(before.length);
  return { expectIds: before.map((c) => c.id), texts, metadata, splices, resultIds: after.map((e) => e.id) };
}

/** Positions (into `values`) of one longest strictly increasing subsequence. */
export function longestIncreasing(values: readonly number[]): number[] {
  const tails: number[] = []; // tails[k]: position of the smallest tail of an increasing run of length k+1
  const previous: number[] = new Array<number>(values.length).fill(-1);
  values.forEach((v, i) => {
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (values[tails[mid]!]! < v) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) previous[i] = tails[lo - 1]!;
    tails[lo] = i;
  });
  const out: number[] = [];
  for (let i = tails.length ? tails[tails.length - 1]! : -1; i >= 0; i = previous[i]!) out.push(i);
  return out.reverse();
}
