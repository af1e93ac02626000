import type { WriteGuard } from './cells';

/**
 * Read-before-write (marimo PR #9585's rule, over HTTP): per notebook, the version of each cell
 * at the moment an agent was last shown its code. A write to a non-empty cell is allowed only
 * when the cell is still at that version, so what the person typed meanwhile is never
 * overwritten unseen. An explicit `version` replaces the record; `force` skips the check.
 */
export class ReadTracker {
  private readonly seen = new Map<string, Map<string, number>>();

  /** The agent was shown `id` at `version` (a list, a get, or its own write). */
  saw(notebook: string, id: string, version: number): void {
    let cells = this.seen.get(notebook);
    if (!cells) this.seen.set(notebook, (cells = new Map()));
    cells.set(id, version);
  }

  seenVersion(notebook: string, id: string): number | undefined {
    return this.seen.get(notebook)?.get(id);
  }

  /** Drops the records of cells that no longer exist. */
  forget(notebook: string, ids: Iterable<string>): void {
    const cells = this.seen.get(notebook);
    if (cells) for (const id of ids) cells.delete(id);
  }

  /** Drops the records of notebooks that are no longer open. */
  retainNotebooks(open: ReadonlySet<string>): void {
    for (const notebook of this.seen.keys()) if (!open.has(notebook)) this.seen.delete(notebook);
  }

  /**
   * Why writing `cell` must be refused, or undefined when the write may go ahead. Empty cells
   * are exempt: there is nothing of the person's to lose.
   */
  conflict(
    notebook: string,
    cell: { id: string; index: number; version: number; code: string },
    guard: WriteGuard,
  ): string | undefined {
    if (guard.force || cell.code.trim() === '') return undefined;
    const label = `Cell ${cell.id} (index ${cell.index})`;
    const retry =
      'Nothing was changed: read it again (GET /notebooks/cells/' + cell.id + '), or pass "force": true to overwrite it.';
    if (guard.version !== undefined) {
      if (guard.version === cell.version) return undefined;
      return `${label} is at version ${cell.version}, not ${guard.version}: it changed since that version was read. ${retry}`;
    }
    const seen = this.seenVersion(notebook, cell.id);
    if (seen === undefined) {
      return `${label} has not been read by the bridge's clients yet, and it is not empty. ${retry}`;
    }
    if (seen === cell.version) return undefined;
    return `${label} changed since you read it (version ${seen} → ${cell.version}): someone edited it in the editor. ${retry}`;
  }
}
