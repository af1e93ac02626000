import * as vscode from 'vscode';
import type { ActionOutcome } from '../core/agents/accessPolicy';
import type { ActivityStore, Entry } from './record';
import { describeFindings } from '../core/model/riskScan';

export const VIEW_ID = 'agentBridge.activity';
export const SHOW_ACTIVITY = 'agentBridge.showActivity';
export const REVEAL_ACTIVITY_CELL = 'agentBridge.revealActivityCell';
const DETAIL_SCHEME = 'agent-bridge-activity';
const SHOWN = 200;
/** The view redraws at most this often, however many actions start and end. */
const REDRAW_MS = 150;
const RECENT_CLIENT_MS = 30 * 60_000;

const ICONS: Record<ActionOutcome | 'running', string> = {
  running: 'loading~spin',
  succeeded: 'pass',
  failed: 'error',
  interrupted: 'debug-stop',
  timed_out: 'watch',
  refused: 'circle-slash',
};

export interface ViewStatus {
  server(): string;
  mode(): string;
  clients(): ReadonlyMap<string, number>;
}

/** Rows of the agents at work now, shown above the record (presenceMarks.ts), and when they change. */
export interface PresentRows {
  rows(): vscode.TreeItem[];
  readonly onDidChange: vscode.Event<void>;
}

type Row = Entry | vscode.TreeItem;

const time = (at: number) => new Date(at).toLocaleTimeString([], { hour12: false });
const duration = (ms: number) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);

/**
 * One row: time and kind as its label; outcome, duration, client, notebook and summary beside it,
 * in that order, as a narrow sidebar cuts from the end.
 */
export function rowOf(entry: Entry): { label: string; description: string } {
  const { action, end } = entry;
  return {
    label: `${time(action.startedAt)} ${action.label}`,
    description: [
      end ? `${end.outcome.replace('_', ' ')} ${duration(end.durationMs)}` : 'running',
      ...(end?.risk?.level ? [`risk: ${end.risk.level}`] : []),
      action.client,
      entry.notebookLabel.split(/[\\/]/).pop(),
      action.summary,
    ].join(' · '),
  };
}

/**
 * The "Agent Bridge" activity view: the agents at work now, then every agent action, newest first,
 * redrawn on starts and ends (throttled), never per output chunk. Its message line carries the
 * server's address, the access mode and the clients seen lately. Selecting a row opens, for an
 * action that changed cells, its change in VS Code's notebook diff; else its code with its
 * outcome and the head of its output.
 */
export class ActivityView implements vscode.TreeDataProvider<Row>, vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly redraw = new vscode.EventEmitter<undefined>();
  readonly onDidChangeTreeData = this.redraw.event;
  private readonly view: vscode.TreeView<Row>;
  private readonly disposables: vscode.Disposable[] = [this.redraw];
  private pending: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ActivityStore,
    private readonly status: ViewStatus,
    /** Opens the whole change an action made (its checkpoint); false when it made none. */
    private readonly showChange: (action: number) => Promise<boolean>,
    private readonly present?: PresentRows,
  ) {
    this.view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: this });
    this.disposables.push(
      this.view,
      store.onDidChange(() => this.schedule()),
      ...(present ? [present.onDidChange(() => this.schedule())] : []),
      vscode.workspace.registerTextDocumentContentProvider(DETAIL_SCHEME, this),
      vscode.commands.registerCommand(SHOW_ACTIVITY, (id: number | Entry) => this.show(id)),
      vscode.commands.registerCommand(REVEAL_ACTIVITY_CELL, (id: number | Entry) => this.reveal(id)),
    );
    this.schedule();
  }

  /** Redraws soon: after a burst of starts and ends, once. */
  schedule(): void {
    this.pending ??= setTimeout(() => {
      this.pending = undefined;
      this.updateMessage();
      this.redraw.fire(undefined);
    }, REDRAW_MS);
  }

  getChildren(entry?: Row): Row[] {
    return entry ? [] : [...(this.present?.rows() ?? []), ...this.store.newest().slice(0, SHOWN)];
  }

  getTreeItem(entry: Row): vscode.TreeItem {
    if (entry instanceof vscode.TreeItem) return entry;
    const { label, description } = rowOf(entry);
    const item = new vscode.TreeItem(label);
    item.id = String(entry.action.id);
    item.description = description;
    item.iconPath = new vscode.ThemeIcon(ICONS[entry.end?.outcome ?? 'running']);
    item.tooltip = [
      label,
      description,
      `By ${entry.action.about}`,
      entry.end?.detail,
      ...(entry.end?.risk ? describeFindings(entry.end.risk) : []),
    ]
      .filter(Boolean)
      .join('\n');
    item.contextValue = entry.notebook ? 'agentAction.notebook' : 'agentAction';
    item.command = { title: 'Show', command: SHOW_ACTIVITY, arguments: [entry.action.id] };
    return item;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const entry = this.store.get(Number(uri.query));
    if (!entry) return '(no longer in the activity record)';
    const { action, end } = entry;
    return [
      `# ${action.label} by ${action.client} in ${entry.notebookLabel}`,
      `# ${action.client}: ${action.about}`,
      `# ${new Date(action.startedAt).toISOString()} · ${end ? `${duration(end.durationMs)} · ${end.outcome}` : 'running'}`,
      ...(end?.detail ? [`# ${end.detail.replace(/\n/g, '\n# ')}`] : []),
      ...(end?.risk ? describeFindings(end.risk, 50).map((l) => `# risk: ${l}`) : []),
      '',
      end?.ran ?? action.code,
      '',
      ...(end?.output ? ['# ---- output (head)', ...end.output.split('\n').map((l) => `# ${l}`)] : []),
    ].join('\n');
  }

  private entry(id: number | Entry): Entry | undefined {
    return typeof id === 'number' ? this.store.get(id) : id;
  }

  private async show(id: number | Entry): Promise<void> {
    const entry = this.entry(id);
    if (!entry) return;
    if (await this.showChange(entry.action.id)) return;
    const query = String(entry.action.id);
    const uri = vscode.Uri.from({ scheme: DETAIL_SCHEME, path: `/action-${query}.py`, query });
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { preview: true });
  }

  /** Shows the notebook of an action with the first cell it changed selected. */
  private async reveal(id: number | Entry): Promise<void> {
    const entry = this.entry(id);
    if (!entry?.notebook) return;
    const cell = entry.changes.find((c) => c.cell.index >= 0)?.cell;
    const range = cell ? new vscode.NotebookRange(cell.index, cell.index + 1) : undefined;
    const editor = await vscode.window.showNotebookDocument(entry.notebook, range ? { selections: [range] } : {});
    if (range) editor.revealRange(range, vscode.NotebookEditorRevealType.InCenterIfOutsideViewport);
  }

  private updateMessage(): void {
    const now = Date.now();
    const clients = [...this.status.clients()]
      .filter(([, at]) => now - at < RECENT_CLIENT_MS)
      .sort((a, b) => b[1] - a[1])
      .map(([name]) => name);
    this.view.message = `${this.status.server()} · access: ${this.status.mode()} · recent clients: ${clients.join(', ') || 'none'}`;
  }

  dispose(): void {
    clearTimeout(this.pending);
    for (const d of this.disposables) d.dispose();
  }
}
