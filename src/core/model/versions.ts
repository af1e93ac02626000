/** Whose reads and writes: a client as clients.ts knows it (`key` tells clients apart, `label` is shown). */
/** Guards a write against clobbering what the person typed (see ReadTracker below). */
export interface WriteGuard {
  readonly version?: number | undefined;
  readonly force?: boolean | undefined;
}

export interface Reader {
  readonly key: string;
  readonly label: string;
  /** A key whose reads count as this reader's too (what a client read before it held a credential). */
  readonly earlier?: string;
}

/** Writes that come from code running in the kernel (code mode) rather than from an agent's request. */
export const KERNEL_READER: Reader = { key: 'kernel', label: 'code running in the kernel' };

/**
 * Read-before-write (marimo PR #9585's rule, over HTTP), kept per client: per notebook, the
 * version of each cell at the moment that client was last shown its code. A write to a non-empty
 * cell is allowed only when the cell is still at the version this writer read, so neither what the
 * person typed nor another agent's change is overwritten unseen, whoever else read the cell. An
 * explicit `version` replaces the record; `force` skips the check. The last agent write of each
 * cell is kept too, so a refusal can say who changed it.
 */
export class ReadTracker {
  /** notebook → reader key → cell id → version seen. */
  private readonly seen = new Map<string, Map<string, Map<string, number>>>();
  /** notebook → cell id → the last agent write: its version and writer. */
  private readonly written = new Map<string, Map<string, { version: number; by: string }>>();

  /** `reader` was shown `id` at `version` (a list, a get, or its own write). */
  saw(reader: Reader, notebook: string, id: string, version: number): void {
    let readers = this.seen.get(notebook);
    if (!readers) this.seen.set(notebook, (readers = new Map()));
    let cells = readers.get(reader.key);
    if (!cells) readers.set(reader.key, (cells = new Map()));
    cells.set(id, version);
  }

  /** `reader` wrote `id`, which is now at `version` (it also counts as read by them). */
  wrote(reader: Reader, notebook: string, id: string, version: number): void {
    this.saw(reader, notebook, id, version);
    let cells = this.written.get(notebook);
    if (!cells) this.written.set(notebook, (cells = new Map()));
    cells.set(id, { version, by: reader.label });
  }

  seenVersion(reader: Reader, notebook: string, id: string): number | undefined {
    const readers = this.seen.get(notebook);
    return (
      readers?.get(reader.key)?.get(id) ?? (reader.earlier === undefined ? undefined : readers?.get(reader.earlier)?.get(id))
    );
  }

  /** Who made the cell's current version: the agent whose write left it so, else the person in the editor. */
  changedBy(notebook: string, id: string, version: number): string {
    const last = this.written.get(notebook)?.get(id);
    return last && last.version === version ? last.by : 'the person, in the editor';
  }

  /** Drops the records of cells that no longer exist. */
  forget(notebook: string, ids: Iterable<string>): void {
    const all = [...ids];
    for (const cells of this.seen.get(notebook)?.values() ?? []) for (const id of all) cells.delete(id);
    const written = this.written.get(notebook);
    if (written) for (const id of all) written.delete(id);
  }

  /** Drops the records of notebooks that are no longer open. */
  retainNotebooks(open: ReadonlySet<string>): void {
    for (const notebook of this.seen.keys()) if (!open.has(notebook)) this.seen.delete(notebook);
    for (const notebook of this.written.keys()) if (!open.has(notebook)) this.written.delete(notebook);
  }

  /**
   * Why `reader` writing `cell` must be refused (with who made its current version), or
   * undefined when the write may go ahead. Empty cells are exempt: there is nothing to lose.
   */
  conflict(
    reader: Reader,
    notebook: string,
    cell: { id: string; index: number; version: number; code: string },
    guard: WriteGuard,
  ): { why: string; changedBy: string } | undefined {
    if (guard.force || cell.code.trim() === '') return undefined;
    const label = `Cell ${cell.id} (index ${cell.index})`;
    const changedBy = this.changedBy(notebook, cell.id, cell.version);
    const retry =
      'Nothing was changed: read it again (GET /notebooks/cells/' + cell.id + '), or pass "force": true to overwrite it.';
    if (guard.version !== undefined) {
      if (guard.version === cell.version) return undefined;
      return {
        why: `${label} is at version ${cell.version}, not ${guard.version}: ${changedBy} changed it since that version was read. ${retry}`,
        changedBy,
      };
    }
    const seen = this.seenVersion(reader, notebook, cell.id);
    if (seen === undefined) {
      return {
        why: `${label} has not been read by you (${reader.label}) yet, and it is not empty; its current version is by ${changedBy}. ${retry}`,
        changedBy,
      };
    }
    if (seen === cell.version) return undefined;
    return {
      why: `${label} changed since you read it (version ${seen} → ${cell.version}): ${changedBy} changed it. ${retry}`,
      changedBy,
    };
  }
}
