import * as vscode from 'vscode';
import type { CellMark, ForcedWrite, Presence, PresentAgent } from '../core/agents/presence';
import type { AgentVerb } from '../core/model/presenceAnswer';

export const SHOW_AGENTS_HERE = 'agentBridge.showAgentsHere';
const NOTEBOOK_TYPES = ['jupyter-notebook', 'marimo-notebook'];
/** Redraws at most this often, however many requests note where agents are. */
const REDRAW_MS = 150;

const ICONS: Record<AgentVerb | 'queued', string> = {
  reading: 'eye',
  editing: 'edit',
  running: 'loading~spin',
  queued: 'watch',
};

export interface PresenceNotebooks {
  cellId(cell: vscode.NotebookCell): string;
  /** The notebook's name for the person (its registry label). */
  label(notebook: vscode.NotebookDocument): string;
}

const PAST: Record<AgentVerb, string> = { reading: 'read', editing: 'edited', running: 'ran' };

const verbOf = (mark: Pick<CellMark, 'verb' | 'phase'>) => (mark.phase === 'queued' ? 'queued to run' : mark.verb);

/**
 * What the person sees of agents at work: each cell an agent reads, edits or runs carries a cell
 * status bar item ("Running · bob"; reads and edits fade after a few seconds, a run stays while
 * it runs), the status bar says how many agents are active in the notebook in front (a click lists
 * them with their cell and shows it), and the activity view gets a row per agent active anywhere.
 * All of it is read from the Presence record and redrawn on its changes, throttled.
 */
export class PresenceMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly refresh = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.refresh.event;
  /** The agents present changed: the activity view's rows are redrawn. */
  readonly onDidChange = this.refresh.event;
  private readonly item = vscode.window.createStatusBarItem('agentBridge.presence', vscode.StatusBarAlignment.Right, 98);
  private readonly disposables: vscode.Disposable[] = [this.refresh, this.item];
  private pending: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;

  constructor(
    private readonly presence: Presence,
    private readonly notebooks: PresenceNotebooks,
  ) {
    this.item.name = 'Agents in This Notebook';
    this.item.command = SHOW_AGENTS_HERE;
    const unlisten = presence.onDidChange(() => this.schedule());
    const unlistenForced = presence.onForcedWrite((forced) => this.tellForced(forced));
    this.disposables.push(
      { dispose: unlisten },
      { dispose: unlistenForced },
      ...NOTEBOOK_TYPES.map((type) => vscode.notebooks.registerNotebookCellStatusBarItemProvider(type, this)),
      vscode.window.onDidChangeActiveNotebookEditor(() => this.updateStatus()),
      vscode.commands.registerCommand(SHOW_AGENTS_HERE, () => this.pick()),
    );
  }

  provideCellStatusBarItems(cell: vscode.NotebookCell): vscode.NotebookCellStatusBarItem[] {
    const id = this.notebooks.cellId(cell);
    return this.presence
      .marks(cell.notebook.uri.toString())
      .filter((m) => m.cell === id)
      .map((mark) => {
        const verb = verbOf(mark);
        const item = new vscode.NotebookCellStatusBarItem(
          // The verb first: a long name is cut at the item's width, the verb must stay.
          `$(${ICONS[mark.phase === 'queued' ? 'queued' : mark.verb]}) ${verb[0]!.toUpperCase()}${verb.slice(1)} · ${mark.agent}`,
          vscode.NotebookCellStatusBarAlignment.Left,
        );
        item.tooltip = `${mark.agent} is ${verb === 'queued to run' ? 'waiting to run' : verb} this cell through Agent Bridge.`;
        return item;
      });
  }

  /**
   * One activity-view row per agent active in an open notebook: who, what, which cell, where.
   * Agents at work now come first ("Now:"), then the recently idle ("Recently:"), newest first:
   * a long list is cut by the view's height, and what is going on now must not be below it.
   */
  rows(): vscode.TreeItem[] {
    const present = vscode.workspace.notebookDocuments.flatMap((notebook) =>
      this.presence.agents(notebook.uri.toString()).map((agent) => ({ notebook, agent })),
    );
    present.sort((a, b) => Number(b.agent.now) - Number(a.agent.now) || a.agent.secondsAgo - b.agent.secondsAgo);
    return present.map(({ notebook, agent }) => {
      const row = new vscode.TreeItem(`${agent.now ? 'Now' : 'Recently'}: ${agent.name}`);
      row.id = `presence:${notebook.uri.toString()}:${agent.key}`;
      row.description = `${this.doing(notebook, agent)} · ${this.fileName(notebook)}`;
      row.iconPath = new vscode.ThemeIcon(agent.now ? ICONS[agent.verb] : 'circle-outline');
      row.tooltip = `${agent.name} is active in ${this.notebooks.label(notebook)}: ${this.doing(notebook, agent)}`;
      row.command = { title: 'Show the cell', command: SHOW_AGENTS_HERE, arguments: [notebook, agent.cell] };
      return row;
    });
  }

  /** A forced write over the person's typing is never silent: they are told who, where, and how to take it back. */
  private tellForced({ notebook: uri, agent, cells }: ForcedWrite): void {
    const notebook = vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri);
    const name = notebook ? this.fileName(notebook) : uri;
    const where = cells.map((c) => `cell ${c.index + 1}`).join(', ');
    void vscode.window.showWarningMessage(
      `${agent} wrote over what you were typing in ${name}, ${where} (it passed "force"). ` + 'Agent Changes can revert it.',
    );
  }

  /** Redraws soon: after a burst of changes, once; and again when a mark fades. */
  private schedule(): void {
    this.pending ??= setTimeout(() => {
      this.pending = undefined;
      this.refresh.fire();
      this.updateStatus();
      clearTimeout(this.expiry);
      const next = this.presence.nextExpiry();
      if (next !== undefined) this.expiry = setTimeout(() => this.schedule(), Math.max(0, next - Date.now()) + 50);
    }, REDRAW_MS);
  }

  private updateStatus(): void {
    const notebook = vscode.window.activeNotebookEditor?.notebook;
    const agents = notebook ? this.presence.agents(notebook.uri.toString()) : [];
    if (!notebook || !agents.length) return this.item.hide();
    this.item.text = `$(hubot) ${agents.length} agent${agents.length === 1 ? '' : 's'} here`;
    this.item.tooltip = `Active in this notebook: ${agents.map((a) => `${a.name} (${this.doing(notebook, a)})`).join('; ')}. Click to list them.`;
    this.item.show();
  }

  /** "running cell 3", "reading the notebook", "running code in the kernel"; "last: edited cell 2, 12 s ago". */
  private doing(notebook: vscode.NotebookDocument, agent: PresentAgent): string {
    const index = agent.cell === null ? -1 : this.indexOf(notebook, agent.cell);
    const where =
      index >= 0
        ? `cell ${index + 1}`
        : agent.cell !== null
          ? 'a cell since deleted'
          : agent.verb === 'running'
            ? 'code in the kernel'
            : 'the notebook';
    return agent.now ? `${agent.verb} ${where}` : `last: ${PAST[agent.verb]} ${where}, ${agent.secondsAgo} s ago`;
  }

  /** The notebook's file name (its label is a path). */
  private fileName(notebook: vscode.NotebookDocument): string {
    return this.notebooks.label(notebook).split(/[\\/]/).pop()!;
  }

  private indexOf(notebook: vscode.NotebookDocument, id: string): number {
    return notebook.getCells().findIndex((c) => this.notebooks.cellId(c) === id);
  }

  /** Lists the agents in the notebook in front (or shows the cell given) and reveals the cell picked. */
  private async pick(notebook?: vscode.NotebookDocument, cell?: string | null): Promise<void> {
    const target = notebook ?? vscode.window.activeNotebookEditor?.notebook;
    if (!target) return;
    let chosen = cell;
    if (notebook === undefined) {
      const agents = this.presence.agents(target.uri.toString());
      if (!agents.length) {
        void vscode.window.showInformationMessage('No agent is active in this notebook now.');
        return;
      }
      const picked = await vscode.window.showQuickPick(
        agents.map((a) => ({ label: a.name, description: this.doing(target, a), cell: a.cell })),
        { title: `Agents in ${this.fileName(target)}`, placeHolder: 'Pick one to show its cell' },
      );
      chosen = picked?.cell;
    }
    const index = chosen ? this.indexOf(target, chosen) : -1;
    if (index < 0) return;
    const range = new vscode.NotebookRange(index, index + 1);
    const editor = await vscode.window.showNotebookDocument(target, { selections: [range], preserveFocus: true });
    editor.revealRange(range, vscode.NotebookEditorRevealType.InCenterIfOutsideViewport);
  }

  dispose(): void {
    clearTimeout(this.pending);
    clearTimeout(this.expiry);
    for (const d of this.disposables) d.dispose();
  }
}
