import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../fsAtomic';

/**
 * What is kept of a cell across window restarts: its version, a hash of its text then, and, for
 * an id the bridge minted (the file holds none: nbformat 4.4), its position.
 */
interface Kept {
  version: number;
  hash: string;
  at?: number;
}
type Stored = Map<string, Record<string, Kept>>;
export interface KeptCell {
  id: string;
  version: number;
  text: string;
  /** Its index, for an id the bridge minted: such ids are found again by position and text. */
  at?: number;
}
/** A minted id found again for the cell at `index`, and the version to continue from. */
export interface FoundAgain {
  id: string;
  version: number;
}

/** Notebooks remembered at most (the least recently changed go first). */
const MAX_NOTEBOOKS = 200;
const WRITE_DELAY_MS = 200;

const hashOf = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 22);

/**
 * Cell versions that outlive the window: per notebook (its uri), the version of each cell with a
 * file id and a hash of its text then. A new window continues from there, +1 when the text
 * changed meanwhile, so a version an agent read before a restart never stands for other text
 * after it. Cells whose file holds no id (nbformat 4.4) keep the id the bridge minted, with its
 * position, and a new window gives it back to the cell at that place with that text
 * (`foundAgain`). A small JSON file in the extension's storage, written shortly after a change
 * (merged with what other windows wrote) and on dispose: a killed extension host loses at most
 * the changes of its last moment (the write delay).
 */
export class VersionStore {
  private snapshot: Stored | undefined;
  private readonly pending = new Map<string, () => Iterable<KeptCell>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly file: string) {}

  /** The version to continue from for a cell this window sees for the first time. */
  restored(notebook: string, id: string, text: string): number | undefined {
    // A notebook reopened in this window before its latest versions were written: take them there.
    for (const c of this.pending.get(notebook)?.() ?? []) if (c.id === id) return c.version + (c.text === text ? 0 : 1);
    this.snapshot ??= readStore(this.file);
    const kept = this.snapshot.get(notebook)?.[id];
    return kept && kept.version + (kept.hash === hashOf(text) ? 0 : 1);
  }

  /**
   * The minted ids an earlier window gave the cells of `notebook` (those without a file id, with
   * their index and text), found again by text and position: a cell whose text is as kept gets
   * the id kept nearest its place. Cells with other text get none (the editor restarted after
   * they changed, and the write delay lost that).
   */
  foundAgain(notebook: string, cells: readonly { index: number; text: string }[]): Map<number, FoundAgain> {
    if (this.pending.has(notebook)) this.flush();
    this.snapshot ??= readStore(this.file);
    const minted = Object.entries(this.snapshot.get(notebook) ?? {}).flatMap(([id, k]) =>
      k.at === undefined ? [] : [{ id, at: k.at, hash: k.hash, version: k.version }],
    );
    return matchByPlace(
      minted,
      cells.map((c) => ({ index: c.index, hash: hashOf(c.text) })),
    );
  }

  /** The notebook's cells changed version: `cells` are read (and hashed) when written, soon. */
  keep(notebook: string, cells: () => Iterable<KeptCell>): void {
    this.pending.set(notebook, cells);
    this.timer ??= setTimeout(() => this.flush(), WRITE_DELAY_MS).unref();
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const stored = readStore(this.file);
    for (const [notebook, cells] of this.pending) {
      // Merged: the cells this window has not read yet keep what an earlier window wrote. Minted
      // ids are this window's whole view of the notebook: earlier ones it did not take back go.
      const kept: Record<string, Kept> = Object.fromEntries(
        Object.entries(stored.get(notebook) ?? {}).filter(([, k]) => k.at === undefined),
      );
      for (const c of cells()) kept[c.id] = { version: c.version, hash: hashOf(c.text), ...(c.at !== undefined && { at: c.at }) };
      stored.delete(notebook); // set again below, as the most recent
      stored.set(notebook, kept);
    }
    this.pending.clear();
    for (const oldest of stored.keys()) {
      if (stored.size <= MAX_NOTEBOOKS) break;
      stored.delete(oldest);
    }
    this.snapshot = stored;
    try {
      writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(stored)));
    } catch {
      // Storage not writable: versions then last for this window only.
    }
  }

  dispose(): void {
    if (this.pending.size) this.flush();
  }
}

/** The file's notebooks, each with the entries that have the expected shape (others dropped). */
function readStore(file: string): Stored {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return new Map();
  }
  const stored: Stored = new Map();
  if (typeof parsed !== 'object' || parsed === null) return stored;
  for (const [notebook, cells] of Object.entries(parsed)) {
    if (typeof cells !== 'object' || cells === null) continue;
    const kept: Record<string, Kept> = {};
    for (const [id, k] of Object.entries(cells as Record<string, unknown>)) {
      const { version, hash, at } = (k ?? {}) as Partial<Kept>;
      if (Number.isInteger(version) && typeof hash === 'string')
        kept[id] = { version: version!, hash, ...(Number.isInteger(at) && { at: at! }) };
    }
    stored.set(notebook, kept);
  }
  return stored;
}

/** Pairs of one text beyond which a group is matched in order rather than by distance. */
const MAX_PAIRS = 10_000;

/**
 * Kept ids given back to cells of the same text (hash), nearest position first; within a text,
 * ties and large groups keep their order. Each id and each cell at most once.
 */
export function matchByPlace(
  kept: readonly { id: string; at: number; hash: string; version: number }[],
  cells: readonly { index: number; hash: string }[],
): Map<number, FoundAgain> {
  const found = new Map<number, FoundAgain>();
  const byHash = new Map<string, { kept: (typeof kept)[number][]; cells: number[] }>();
  for (const k of kept) {
    const group = byHash.get(k.hash) ?? { kept: [], cells: [] };
    byHash.set(k.hash, group);
    group.kept.push(k);
  }
  for (const c of cells) byHash.get(c.hash)?.cells.push(c.index);
  for (const group of byHash.values()) {
    const ids = [...group.kept].sort((a, b) => a.at - b.at);
    const places = [...group.cells].sort((a, b) => a - b);
    if (ids.length === places.length || ids.length * places.length > MAX_PAIRS) {
      places.forEach((index, i) => ids[i] && found.set(index, { id: ids[i].id, version: ids[i].version }));
      continue;
    }
    const pairs = ids.flatMap((k) => places.map((index) => ({ k, index, d: Math.abs(k.at - index) })));
    pairs.sort((a, b) => a.d - b.d || a.index - b.index);
    const used = new Set<string>();
    for (const { k, index } of pairs) {
      if (used.has(k.id) || found.has(index)) continue;
      used.add(k.id);
      found.set(index, { id: k.id, version: k.version });
    }
  }
  return found;
}
