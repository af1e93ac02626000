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
import type { BatchOp, CellKind, CellMetadata, CellService, CellSnapshot, CellState, RawOutput } from '../model/cellService';
import { BridgeError } from '../bridgeError';
import type { Caller } from '../agents/clients';

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
  /** Who made it, short ("bob (unverified)"). */
  readonly client: string;
  /** Who made it, in full (the hover). */
  readonly about?: string;
  /** The key of the credential of the agent that made it (clients.ts); absent: a client without one. */
  readonly owner?: string;
  /** Epoch milliseconds. */
  readonly at: number;
  /** "1 added, 2 edited". */
  summary: string;
  cells: readonly CellDelta[];
  /** The person kept it: out of the review list, still known for "who changed it since". */
  kept?: true;
  /** A batch being applied in steps: written before its first step, what it plans; settled after its last. */
  applying?: true;
}

/** Who a change is by; null: a change that is not recorded (a revert itself). */
export interface Author {
  readonly client: string;
  readonly about?: string;
  /** The key its changes are kept under (clients.ts); absent: it holds no credential, and can undo nothing. */
  readonly owner?: string;
  /** Its credential was minted by this very request (it sent none), so it owns no earlier change. */
  readonly minted?: true;
  readonly action?: number;
}

/** The author of what a caller changes, or of what an agent action changes (with its id). */
export function authorOf(caller: Caller & { readonly id?: number; readonly minted?: true }): Author {
  return {
    client: caller.client,
    about: caller.about,
    ...(caller.owner !== undefined && { owner: caller.owner }),
    ...(caller.minted && { minted: true as const }),
    ...(caller.id !== undefined && { action: caller.id }),
  };
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
/** Why a cell of a change made before the editor restarted is not found: its id may be gone with the old window. */
export const UNIDENTIFIED = 'the cell can no longer be identified (the editor restarted)';
/** Why a cell of a batch the editor stopped in the middle of is left alone. */
const NOT_APPLIED = 'the batch was cut short before this part of it was applied';
const SEND_CREDENTIAL =
  'Send back the X-Agent-Bridge-Credential header returned with the answer to your change (MCP: call from the session that made it).';
const NO_CREDENTIAL = `Undo takes back only your own changes, and this request carries no credential of the bridge, so it owns none. ${SEND_CREDENTIAL} The person can revert any change in VS Code ("Agent Changes").`;

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

/** What a checkpoint reads of a cell. */
export type CellLook = Pick<CellSnapshot, 'id' | 'kind' | 'language' | 'code' | 'metadata' | 'outputs'>;

function face(cell: CellLook, index: number): CellFace {
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
export function deltasOf(before: readonly CellLook[], after: readonly CellLook[]): CellDelta[] {
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
 * who changed a cell since (else the person did). A checkpoint from before the editor restarted
 * (`restarted`) cannot tell a cell the person deleted from one the new editor no longer knows, and
 * says so; one of a batch cut short (`applying`) leaves the cells it never reached. Writes carry
 * the version read here, so a cell changed between this plan and its apply is refused (409), not
 * overwritten. Cells go back where they were (changeSides.ts): those that move are first moved to
 * the end, then each is placed, in order.
 */
export function planRevert(
  checkpoint: Checkpoint,
  now: readonly CellState[],
  laterBy: (cellId: string) => string | undefined,
  only: readonly CellDelta[] = checkpoint.cells,
  restarted = false,
): RevertPlan {
  const cutShort = checkpoint.applying === true;
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
      if (cell) skip(d, cutShort ? NOT_APPLIED : 'it was deleted by the agent and is back', i!, false);
      else if (d.before!.cut)
        skip(d, `its code was longer than ${MAX_CODE_CHARS} characters and was not kept whole`, d.before!.index, false);
      else going.push(d);
      continue;
    }
    if (!cell) {
      if (cutShort && !d.before) skip(d, restarted ? `${NOT_APPLIED}, or ${UNIDENTIFIED}` : NOT_APPLIED, d.after.index, false);
      else if (restarted) skip(d, UNIDENTIFIED, d.after.index, false);
      else skip(d, 'it was deleted since', d.after.index);
      continue;
    }
    const asLeft = cell.code === d.after.code && cell.kind === d.after.kind && cell.language === d.after.language;
    const untouched = d.before !== null && cell.code === d.before.code && cell.kind === d.before.kind;
    if (cutShort && !asLeft && untouched) {
      skip(d, NOT_APPLIED, i!, false);
      continue;
    }
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

/** One of an agent's own changes, as `GET /notebooks/changes` lists it. */
export interface ChangeView {
  readonly id: number;
  readonly notebook: string;
  /** ISO time. */
  readonly at: string;
  readonly summary: string;
  readonly cells: { id: string; change: ReturnType<typeof deltaKind>; index: number }[];
  /** Whether `POST /notebooks/undo {"checkpoint": id}` would take it back now; `why` not. */
  readonly undoable: boolean;
  readonly why?: string;
}

/** Where the list is kept between window reloads. */
export interface CheckpointFile {
  load(): Checkpoint[];
  /** Keeps the list, soon (a burst of changes is one write), or before returning when `now`. */
  save(checkpoints: readonly Checkpoint[], now?: boolean): void;
}

/**
 * What reverts need of the cell rules (NotebookCells): a notebook's cells as they are, read
 * without counting as anyone's read, and batches.
 */
export interface RevertCells {
  states(notebook: string | undefined): { uri: string; cells: CellState[] };
  batch: CellService['batch'];
}

/** A change being applied in steps: `end` settles its checkpoint with the cells as they are after it. */
export interface Journal {
  readonly checkpoint: Checkpoint;
  /** The agent action making the change (of this window's activity record). */
  readonly action: number | undefined;
  end(after: readonly CellLook[]): void;
}

/**
 * The checkpoints of this window's notebooks, newest last, bounded in count and size. Records
 * every change the cell rules apply (`record`, called by NotebookCells) under the author the
 * transport set with `asAuthor`; reverts and undoes go back through the same cell rules. An
 * agent's own are those kept under its owner key; a checkpoint loaded from the file is of an
 * earlier window, whose agents no client now can be.
 */
export class Checkpoints {
  private readonly list: Checkpoint[];
  private nextId: number;
  /** Checkpoints below this id were made before the editor (re)started. */
  private readonly firstOfWindow: number;
  private readonly listeners = new Set<() => void>();
  private readonly sizes = new WeakMap<Checkpoint, number>();
  /** Action ids are this window's (they start again at 1 after a reload), so this is not stored. */
  private readonly byAction = new Map<number, number>();

  constructor(
    private readonly cells: () => RevertCells,
    private readonly file: CheckpointFile,
    private readonly now: () => number = Date.now,
  ) {
    this.list = file.load();
    this.nextId = Math.max(0, ...this.list.map((c) => c.id)) + 1;
    this.firstOfWindow = this.nextId;
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

  /** Whether it was made before the editor (re)started: no agent now can undo it, only the person revert it. */
  earlier(checkpoint: Checkpoint): boolean {
    return checkpoint.id < this.firstOfWindow;
  }

  /** Whether any checkpoint is kept under `owner` (its client's credential must then stay known). */
  owns(owner: string): boolean {
    return this.list.some((c) => c.owner === owner);
  }

  /** The newest checkpoint of an action of this window's activity record. */
  ofAction(action: number): Checkpoint | undefined {
    const id = this.byAction.get(action);
    return id === undefined ? undefined : this.get(id);
  }

  /** Notes a change the cell rules applied to `notebook`. */
  record(notebook: string, before: readonly CellLook[], after: readonly CellLook[]): void {
    const cells = deltasOf(before, after);
    if (cells.length) this.add(notebook, cells);
  }

  /**
   * Notes a change about to be applied in steps, as it plans to leave the cells, and writes it
   * before returning, so an editor stopped between two steps leaves a record of it; `end` settles
   * it with what was applied (nothing: it goes). Undefined when the change is not recorded.
   */
  begin(notebook: string, before: readonly CellLook[], planned: readonly CellLook[]): Journal | undefined {
    const checkpoint = this.add(notebook, deltasOf(before, planned), true);
    if (!checkpoint) return undefined;
    return {
      checkpoint,
      action: authors.getStore()?.action,
      end: (after) => {
        const cells = deltasOf(before, after);
        delete checkpoint.applying;
        this.sizes.delete(checkpoint);
        if (cells.length) Object.assign(checkpoint, { cells, summary: summaryOf(cells) });
        else this.list.splice(this.list.indexOf(checkpoint), 1);
        this.changed();
      },
    };
  }

  private add(notebook: string, cells: readonly CellDelta[], applying = false): Checkpoint | undefined {
    const author = authors.getStore();
    if (author === null || !cells.length) return undefined;
    const { client, about, owner, action } = author ?? UNKNOWN_AUTHOR;
    const id = this.nextId++;
    const checkpoint: Checkpoint = {
      id,
      notebook,
      client,
      ...(about !== undefined && { about }),
      ...(owner !== undefined && { owner }),
      at: this.now(),
      summary: summaryOf(cells),
      cells,
      ...(applying && { applying: true as const }),
    };
    this.list.push(checkpoint);
    if (action !== undefined) this.byAction.set(action, id);
    // Only the newest can still name a kept checkpoint.
    if (this.byAction.size > MAX_CHECKPOINTS) this.byAction.delete(this.byAction.keys().next().value!);
    this.changed(applying);
    return checkpoint;
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

  /** Who made a checkpoint, for "Revert all by": its owner when it had a credential, else its name. */
  static whose(checkpoint: Checkpoint): string {
    return checkpoint.owner ?? checkpoint.client;
  }

  /** Reverts the changes by `who` (see `whose`) at or after `since`, newest first. */
  async revertAllBy(who: string, since: number): Promise<RevertResult[]> {
    const chosen = this.list.filter((c) => Checkpoints.whose(c) === who && c.at >= since).reverse();
    const results: RevertResult[] = [];
    for (const checkpoint of chosen) results.push(await this.apply(checkpoint, false));
    return results;
  }

  /** The owner key of the agent making this call (the author its transport set); refuses one without. */
  private caller(): string {
    const author = authors.getStore();
    if (!author?.owner || author.minted) throw new BridgeError('forbidden', NO_CREDENTIAL);
    return author.owner;
  }

  /**
   * The calling agent's own changes (in `notebook`, when named), newest first, each saying whether
   * its undo would go through now. A caller without a credential owns none, and is told why.
   */
  async mine(notebook: string | undefined): Promise<{ changes: ChangeView[]; detail?: string }> {
    const author = authors.getStore();
    if (!author?.owner)
      return {
        changes: [],
        detail: `This request carries no credential of the bridge, so it owns no change. ${SEND_CREDENTIAL}`,
      };
    const uri = notebook === undefined ? undefined : this.cells().states(notebook).uri;
    const own = this.list.filter((c) => c.owner === author.owner && (uri === undefined || c.notebook === uri)).reverse();
    const open = new Map<string, CellState[] | undefined>();
    const changes: ChangeView[] = [];
    for (const c of own) {
      if (!open.has(c.notebook)) open.set(c.notebook, this.statesOf(c.notebook));
      const why = c.kept ? 'the person kept it' : this.blocked(c, open.get(c.notebook));
      changes.push({
        id: c.id,
        notebook: c.notebook,
        at: new Date(c.at).toISOString(),
        summary: c.summary,
        cells: c.cells.map((d) => ({ id: d.id, change: deltaKind(d), index: (d.after ?? d.before)!.index })),
        undoable: why === undefined,
        ...(why !== undefined && { why }),
      });
    }
    return { changes };
  }

  /** A notebook's cells now; undefined when it is not open. */
  private statesOf(notebook: string): CellState[] | undefined {
    try {
      return this.cells().states(notebook).cells;
    } catch (error) {
      if (error instanceof BridgeError) return undefined;
      throw error;
    }
  }

  /** Why an undo of `checkpoint` would be refused with the cells as they are (`now`); undefined when it would go through. */
  private blocked(checkpoint: Checkpoint, now: readonly CellState[] | undefined): string | undefined {
    if (!now) return 'its notebook is not open';
    const { skipped } = this.plan(checkpoint, now);
    return skipped.length ? skipped.map((s) => `cell ${s.id} (index ${s.index}): ${s.why}`).join('; ') : undefined;
  }

  /**
   * An agent's undo of one of its own changes: the one `checkpoint` names (ids from `mine`), else
   * its newest (in `notebook`, when named). All of it or nothing: a 409 naming the cells changed
   * since, and by whom, when it would lose later work.
   */
  async undoOwn(notebook: string | undefined, checkpoint?: number): Promise<RevertResult> {
    const owner = this.caller();
    const uri = notebook === undefined ? undefined : this.cells().states(notebook).uri;
    const where = notebook === undefined ? '' : ` in ${notebook}`;
    const theirs = (c: Checkpoint) => c.owner === owner && (uri === undefined || c.notebook === uri);
    if (checkpoint !== undefined) {
      const chosen = this.get(checkpoint);
      if (!chosen || !theirs(chosen))
        throw new BridgeError(
          'not_found',
          `You have no change ${checkpoint}${where}: GET /notebooks/changes (MCP list_changes) lists yours; a change reverted, or dropped as the list grew, is gone.`,
        );
      if (chosen.kept)
        throw new BridgeError('conflict', `The person kept change ${checkpoint} in VS Code: it is no longer undone by agents.`);
      return this.apply(chosen, true);
    }
    const newest = this.newest((c) => theirs(c) && !c.kept);
    if (!newest)
      throw new BridgeError(
        'not_found',
        `You have no change left to undo${where}: undo reverts your newest change (edits and code-mode flushes) that is not yet reverted or kept by the person.`,
      );
    return this.apply(newest, true);
  }

  /** What an agent's undo would take back, for the person's prompt: the change, its cells and whose it is. */
  describeUndo(author: Author, checkpoint: number | undefined): string {
    const theirs = (c: Checkpoint | undefined) => !!c && author.owner !== undefined && !author.minted && c.owner === author.owner;
    const chosen = checkpoint !== undefined ? this.get(checkpoint) : this.newest((c) => theirs(c) && !c.kept);
    if (!theirs(chosen))
      return `take back a change of its own (it has none${checkpoint === undefined ? '' : ` numbered ${checkpoint}`})`;
    const cells = chosen!.cells.map((d) => (d.after ?? d.before)!.index + 1);
    const at = new Date(chosen!.at).toLocaleTimeString([], { hour12: false });
    return `take back its own change ${chosen!.id}, made at ${at}: ${chosen!.summary} (cell${cells.length === 1 ? '' : 's'} ${cells.join(', ')})`;
  }

  private plan(checkpoint: Checkpoint, now: readonly CellState[], only?: readonly CellDelta[]): RevertPlan {
    return planRevert(checkpoint, now, (id) => this.laterBy(checkpoint, id), only, this.earlier(checkpoint));
  }

  /** Reverts the checkpoint, or `only` some of its cells (the others stay in it, to review). */
  private async apply(checkpoint: Checkpoint, whole: boolean, only?: readonly CellDelta[]): Promise<RevertResult> {
    const cells = this.cells();
    const plan = this.plan(checkpoint, cells.states(checkpoint.notebook).cells, only);
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

  private changed(now = false): void {
    let total = this.list.reduce((sum, c) => sum + this.sizeOf(c), 0);
    while (this.list.length > MAX_CHECKPOINTS || (total > MAX_STORED_CHARS && this.list.length > 1))
      total -= this.sizeOf(this.list.shift()!);
    this.file.save(this.list, now);
    for (const listener of this.listeners) listener();
  }
}
