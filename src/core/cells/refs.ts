import type { CellRef, NotebookEntry } from '../model/cellService';
import { BridgeError } from '../bridgeError';

/** How a notebook is named in messages: its path, else its uri. */
export function notebookLabel(n: Pick<NotebookEntry, 'path' | 'uri'>): string {
  return n.path ?? n.uri;
}

function openList(notebooks: readonly NotebookEntry[]): string {
  return notebooks.map((n) => `${notebookLabel(n)} (${n.sessionId})`).join(', ');
}

const summary = (n: NotebookEntry) => ({ sessionId: n.sessionId, path: n.path, uri: n.uri });

/**
 * Finds the notebook a request names by session id, uri or path. Without a name, the only open
 * notebook; with several open the caller must choose (400), with none there is nothing (404).
 */
export function resolveNotebook<T extends NotebookEntry>(notebooks: readonly T[], ref: string | undefined): T {
  if (ref === undefined || ref === '') {
    if (notebooks.length === 1) return notebooks[0]!;
    if (notebooks.length === 0) throw new BridgeError('not_found', 'No notebook is open in the editor', { notebooks: [] });
    throw new BridgeError(
      'bad_input',
      `${notebooks.length} notebooks are open: pass "notebook" (a session id, path or uri): ${openList(notebooks)}`,
      {
        notebooks: notebooks.map(summary),
      },
    );
  }
  const decoded = safeDecode(ref);
  const match =
    notebooks.find((n) => n.sessionId === ref || n.uri === ref || n.path === ref) ??
    notebooks.find((n) => safeDecode(n.uri) === decoded || (n.path !== null && stripSlash(n.path) === stripSlash(ref)));
  if (!match) {
    const open = notebooks.length ? `open notebooks: ${openList(notebooks)}` : 'no notebook is open';
    throw new BridgeError('not_found', `No open notebook matches '${ref}'; ${open}`, { notebooks: notebooks.map(summary) });
  }
  return match;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const stripSlash = (p: string) => p.replace(/[\\/]+$/, '');

/** A ref as given in JSON or a URL segment: integers (also "3", "-1") are indices, the rest ids. */
export function parseCellRef(ref: CellRef): { index: number } | { id: string } {
  if (typeof ref === 'number') return { index: ref };
  return /^-?\d+$/.test(ref) ? { index: Number(ref) } : { id: ref };
}

/** Index of the cell `ref` names among `ids`, or a 404 that says how many cells there are. */
export function resolveCellIndex(ids: readonly string[], ref: CellRef, notebook: string): number {
  return cellIndexer(ids, notebook)(ref);
}

/**
 * Resolves many refs against the same cells: each in constant time, through one id → index map
 * made on the first id (an index needs none). A 404 says how many cells there are.
 */
export function cellIndexer(ids: readonly string[], notebook: string): (ref: CellRef) => number {
  let byId: Map<string, number> | undefined;
  const count = ids.length;
  const cells = `${count} cell${count === 1 ? '' : 's'}`;
  return (ref) => {
    const parsed = parseCellRef(ref);
    if ('index' in parsed) {
      const index = parsed.index < 0 ? count + parsed.index : parsed.index;
      if (Number.isInteger(index) && index >= 0 && index < count) return index;
      const range = count ? `indices 0 to ${count - 1}, or -1 for the last` : 'it is empty';
      throw new BridgeError('not_found', `Cell index ${ref} is out of range: ${notebook} has ${cells} (${range})`, {
        cellCount: count,
      });
    }
    if (!byId) {
      byId = new Map();
      for (const [index, id] of ids.entries()) if (!byId.has(id)) byId.set(id, index);
    }
    const index = byId.get(parsed.id);
    if (index !== undefined) return index;
    throw new BridgeError(
      'not_found',
      `No cell with id '${parsed.id}' in ${notebook}; it has ${cells} (list them with GET /notebooks/cells)`,
      { cellCount: count },
    );
  };
}
