import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../fsAtomic';

/** What is kept of a cell across window restarts: its version, and a hash of its text then. */
interface Kept {
  version: number;
  hash: string;
}
type Stored = Map<string, Record<string, Kept>>;
export interface KeptCell {
  id: string;
  version: number;
  text: string;
}

/** Notebooks remembered at most (the least recently changed go first). */
const MAX_NOTEBOOKS = 200;
const WRITE_DELAY_MS = 200;

const hashOf = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 22);

/**
 * Cell versions that outlive the window: per notebook (its uri), the version of each cell with a
 * file id and a hash of its text then. A new window continues from there, +1 when the text
 * changed meanwhile, so a version an agent read before a restart never stands for other text
 * after it. A small JSON file in the extension's storage, written shortly after a change (merged
 * with what other windows wrote) and on dispose: a killed extension host loses at most the
 * changes of its last moment.
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
      // Merged: the cells this window has not read yet keep what an earlier window wrote.
      const kept: Record<string, Kept> = { ...stored.get(notebook) };
      for (const c of cells()) kept[c.id] = { version: c.version, hash: hashOf(c.text) };
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
      const { version, hash } = (k ?? {}) as Partial<Kept>;
      if (Number.isInteger(version) && typeof hash === 'string') kept[id] = { version: version!, hash };
    }
    stored.set(notebook, kept);
  }
  return stored;
}
