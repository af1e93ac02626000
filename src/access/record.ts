import * as vscode from 'vscode';
import type { ActionEnd, ActivitySink, AgentAction } from '../core/agents/accessPolicy';

/** A cell an agent's edit created or changed, with its text before and after. */
export interface CellChange {
  readonly cell: vscode.NotebookCell;
  readonly before: string;
  readonly after: string;
  readonly created: boolean;
}

/** One agent action as this window saw it: the notebook it touched and what changed. */
export interface Entry {
  readonly action: AgentAction;
  end: ActionEnd | undefined;
  readonly notebook: vscode.NotebookDocument | undefined;
  /** The notebook's label in the registry; else the name the action gave; else "(no notebook)". */
  readonly notebookLabel: string;
  changes: readonly CellChange[];
}

/** The registry of open notebooks (src/notebooks/notebookRegistry.ts), as the record uses it. */
export interface NotebookRegistry {
  /** The notebook an action names (session id, uri or path; undefined: the only one open). */
  find(named: string | undefined): vscode.NotebookDocument | undefined;
  label(notebook: vscode.NotebookDocument): string;
}

const KEPT = 500;

/** How an action's notebook is named: the registry's label when it is open, else the name given. */
export const notebookName = (registry: NotebookRegistry, named: string | undefined): string => {
  const notebook = registry.find(named);
  return notebook ? registry.label(notebook) : (named ?? '(no notebook)');
};

/**
 * The activity record of this window: the newest actions (for the view and the cell marks), each
 * with its notebook resolved when it started. Before an edit runs, the texts of its notebook's
 * cells are noted; when it ends, the cells whose text differs (or that are new) are its changes.
 * Listeners hear of starts and ends only, never of output.
 */
export class ActivityStore implements ActivitySink, vscode.Disposable {
  private readonly entries: Entry[] = [];
  private readonly byId = new Map<number, Entry>();
  private readonly before = new Map<number, Map<vscode.NotebookCell, string>>();
  private readonly changed = new vscode.EventEmitter<Entry>();
  private readonly ended$ = new vscode.EventEmitter<Entry>();
  /** An action started or ended. */
  readonly onDidChange = this.changed.event;
  /** An action ended (its changes are known). */
  readonly onDidEnd = this.ended$.event;

  constructor(private readonly registry: NotebookRegistry) {}

  started(action: AgentAction): void {
    const notebook = this.registry.find(action.notebook);
    const notebookLabel = notebook ? this.registry.label(notebook) : (action.notebook ?? '(no notebook)');
    const entry: Entry = { action, end: undefined, notebook, notebookLabel, changes: [] };
    if (notebook && action.kind === 'edit') {
      this.before.set(action.id, new Map(notebook.getCells().map((c) => [c, c.document.getText()])));
    }
    this.entries.push(entry);
    this.byId.set(action.id, entry);
    if (this.entries.length > KEPT) this.byId.delete(this.entries.shift()!.action.id);
    this.changed.fire(entry);
  }

  ended(action: AgentAction, end: ActionEnd): void {
    const entry = this.byId.get(action.id);
    if (!entry) return;
    entry.end = end;
    const before = this.before.get(action.id);
    this.before.delete(action.id);
    if (before && entry.notebook && end.outcome !== 'refused') entry.changes = changesSince(before, entry.notebook);
    this.ended$.fire(entry);
    this.changed.fire(entry);
  }

  get(id: number): Entry | undefined {
    return this.byId.get(id);
  }

  /** Newest first. */
  newest(): Entry[] {
    return [...this.entries].reverse();
  }

  dispose(): void {
    this.changed.dispose();
    this.ended$.dispose();
  }
}

/**
 * Cells whose text differs from `before`, and new cells. A cell the bridge re-created (a move)
 * is a new object: it counts as changed only when no vanished cell had its text.
 */
function changesSince(before: Map<vscode.NotebookCell, string>, notebook: vscode.NotebookDocument): CellChange[] {
  const cells = notebook.getCells();
  const current = new Set(cells);
  const vanished = new Set([...before].filter(([cell]) => !current.has(cell)).map(([, text]) => text));
  const changes: CellChange[] = [];
  for (const cell of cells) {
    const after = cell.document.getText();
    const old = before.get(cell);
    if (old === undefined) {
      if (!vanished.has(after)) changes.push({ cell, before: '', after, created: true });
    } else if (old !== after) changes.push({ cell, before: old, after, created: false });
  }
  return changes;
}
