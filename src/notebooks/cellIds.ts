import * as vscode from 'vscode';
import type { FoundAgain, KeptCell, VersionStore } from './versionStore';
import { freshId } from '../core/ids';

interface CellRecord {
  id: string;
  /** The id is the notebook file's own (nbformat's cell `id`), not one minted for this window. */
  fromFile: boolean;
  /** version = base + (document.version - docBase): the text's own counter, continued across
   * the copies our moves and re-kinds make of a cell. */
  document: vscode.TextDocument;
  base: number;
  docBase: number;
}

/** What a notebook remembers of an id, so a cell VS Code re-creates (a reload after an edit on
 * disk) continues its version count: same text, same version. */
interface IdHistory {
  /** The cell that holds the id now. */
  cell: vscode.NotebookCell;
  version: number;
  code: string;
}

/**
 * Stable ids and text versions of the cells of open notebooks. A cell's id
 * is the nbformat cell `id` its notebook file carries (VS Code's .ipynb support keeps it in the
 * cell metadata, and gives new cells one in nbformat 4.5+), so it survives saves, reloads,
 * window restarts and edits of the file on disk; cells without one (nbformat 4.4) get an id the
 * bridge mints, kept with the cell's position and text, so that after an editor restart the cell
 * at that place with that text gets it back. Versions outlive the window too, in a `VersionStore`.
 * Records are keyed by the NotebookCell object, which VS Code keeps for as long as the cell
 * exists (edits, outputs, and moves made in the editor keep it). Cells the bridge itself
 * re-creates (a move, a change of kind or language, cleared outputs) are given their old record
 * with `adopt`. Their runs are in RunTickets.
 */
export class CellIds implements vscode.Disposable {
  private readonly records = new WeakMap<vscode.NotebookCell, CellRecord>();
  private readonly taken = new WeakMap<vscode.NotebookDocument, Set<string>>();
  private readonly history = new WeakMap<vscode.NotebookDocument, Map<string, IdHistory>>();
  /** Per notebook, the minted ids an earlier window gave the cells it had when this window first saw it. */
  private readonly earlier = new WeakMap<vscode.NotebookDocument, Map<vscode.NotebookCell, FoundAgain>>();

  constructor(private readonly store?: VersionStore) {}

  id(cell: vscode.NotebookCell): string {
    const r = this.record(cell);
    if (!r.fromFile) {
      // VS Code's .ipynb support writes an id into a new cell's metadata just after it appears.
      const fileId = this.claimable(cell);
      if (fileId) {
        this.histories(cell.notebook).delete(r.id);
        r.id = fileId;
        r.fromFile = true;
      }
    }
    return r.id;
  }

  version(cell: vscode.NotebookCell): number {
    const r = this.record(cell);
    if (cell.document !== r.document) {
      // A new TextDocument for the same cell: continue the count rather than restart it.
      r.base = r.base + (r.document.version - r.docBase) + 1;
      r.document = cell.document;
      r.docBase = cell.document.version;
    }
    const version = r.base + (cell.document.version - r.docBase);
    const histories = this.histories(cell.notebook);
    const changed = histories.get(r.id)?.version !== version;
    histories.set(r.id, { cell, version, code: cell.document.getText() });
    if (changed) this.keep(cell.notebook);
    return version;
  }

  /** An id no cell of this notebook has had. */
  newId(notebook: vscode.NotebookDocument): string {
    const taken = this.takenIds(notebook);
    const id = freshId('c', 5, taken);
    taken.add(id);
    return id;
  }

  /** Gives a cell the bridge just created its id and version. */
  adopt(cell: vscode.NotebookCell, id: string, version: number): void {
    this.takenIds(cell.notebook).add(id);
    this.histories(cell.notebook).set(id, { cell, version, code: cell.document.getText() });
    const fromFile = fileIdOf(cell) === id;
    this.keep(cell.notebook);
    this.records.set(cell, {
      id,
      fromFile,
      document: cell.document,
      base: version,
      docBase: cell.document.version,
    });
  }

  private record(cell: vscode.NotebookCell): CellRecord {
    let r = this.records.get(cell);
    if (!r) {
      const fileId = this.claimable(cell);
      const known = fileId === undefined ? undefined : this.histories(cell.notebook).get(fileId);
      const taken = this.takenIds(cell.notebook);
      const again = fileId === undefined ? this.foundAgain(cell) : undefined;
      const id = fileId ?? again?.id ?? this.newId(cell.notebook);
      taken.add(id);
      r = {
        id,
        fromFile: fileId !== undefined,
        document: cell.document,
        base: again?.version ?? this.startingVersion(cell, fileId, known),
        docBase: cell.document.version,
      };
      this.records.set(cell, r);
    }
    return r;
  }

  /** The id an earlier window minted for this cell, when it was there as the notebook opened and no cell has it since. */
  private foundAgain(cell: vscode.NotebookCell): FoundAgain | undefined {
    const notebook = cell.notebook;
    let found = this.earlier.get(notebook);
    if (!found) {
      const cells = notebook.getCells().filter((c) => fileIdOf(c) === undefined);
      const byIndex =
        this.store?.foundAgain(
          notebook.uri.toString(),
          cells.map((c) => ({ index: c.index, text: c.document.getText() })),
        ) ?? new Map<number, FoundAgain>();
      found = new Map(cells.flatMap((c) => (byIndex.has(c.index) ? [[c, byIndex.get(c.index)!] as const] : [])));
      this.earlier.set(notebook, found);
    }
    const again = found.get(cell);
    found.delete(cell);
    return again && !this.takenIds(notebook).has(again.id) ? again : undefined;
  }

  /**
   * A cell re-created under a known id keeps its count, +1 when its text changed; so does one
   * this window sees for the first time, from the count an earlier window kept.
   */
  private startingVersion(cell: vscode.NotebookCell, fileId: string | undefined, known: IdHistory | undefined): number {
    const text = cell.document.getText();
    if (known) return known.version + (known.code === text ? 0 : 1);
    return (fileId !== undefined && this.store?.restored(cell.notebook.uri.toString(), fileId, text)) || 1;
  }

  /** Has the store write down the ids and versions of the notebook's cells. */
  private keep(notebook: vscode.NotebookDocument): void {
    this.store?.keep(notebook.uri.toString(), () => {
      const kept: KeptCell[] = [];
      for (const [id, h] of this.histories(notebook)) {
        const r = this.records.get(h.cell);
        if (r?.id !== id || h.cell.index < 0) continue;
        kept.push({ id, version: h.version, text: h.code, ...(!r.fromFile && { at: h.cell.index }) });
      }
      return kept;
    });
  }

  /** The cell's file id, unless another cell of the notebook holds it (a pasted copy). */
  private claimable(cell: vscode.NotebookCell): string | undefined {
    const id = fileIdOf(cell);
    if (id === undefined) return undefined;
    const holder = this.histories(cell.notebook).get(id)?.cell;
    const held = holder !== undefined && holder !== cell && holder.index >= 0 && this.records.get(holder)?.id === id;
    return held ? undefined : id;
  }

  private histories(notebook: vscode.NotebookDocument): Map<string, IdHistory> {
    let map = this.history.get(notebook);
    if (!map) this.history.set(notebook, (map = new Map()));
    return map;
  }

  private takenIds(notebook: vscode.NotebookDocument): Set<string> {
    let taken = this.taken.get(notebook);
    if (!taken) this.taken.set(notebook, (taken = new Set()));
    return taken;
  }

  dispose(): void {
    this.store?.dispose();
  }
}

/** nbformat's cell id rule: 1-64 letters, digits, "-" and "_". */
const NBFORMAT_ID = /^[a-zA-Z0-9-_]{1,64}$/;

/** The nbformat cell `id` VS Code's .ipynb support keeps in the cell metadata, if valid. */
export function fileIdOf(cell: vscode.NotebookCell): string | undefined {
  const id = (cell.metadata as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' && NBFORMAT_ID.test(id) ? id : undefined;
}

/** Whether the notebook's file keeps its cells' ids: an .ipynb of nbformat 4.5 or later (VS Code writes a cell's metadata `id` into it). */
export function keepsFileIds(notebook: vscode.NotebookDocument): boolean {
  if (notebook.notebookType !== 'jupyter-notebook') return false;
  const meta = notebook.metadata as { nbformat?: number; nbformat_minor?: number };
  const major = meta.nbformat ?? 0;
  return major > 4 || (major === 4 && (meta.nbformat_minor ?? 0) >= 5);
}
