import * as vscode from 'vscode';
import { Checkpoints, deltaKind, type CellDelta, type Checkpoint, type RevertResult } from '../core/cells/checkpoints';
import { BridgeError } from '../core/bridgeError';
import { errorMessage } from '../core/errorMessage';
import { ago } from './cellMarks';
import type { ChangeDiffs } from './changeDiff';

export const REVIEW_VIEW_ID = 'agentBridge.review';
export const SHOW_CHECKPOINT = 'agentBridge.showAgentChange';
export const KEEP_CHANGE = 'agentBridge.keepAgentChange';
export const REVERT_CHANGE = 'agentBridge.revertAgentChange';
export const REVERT_CELL_CHANGE = 'agentBridge.revertAgentCellChange';
export const REVERT_ALL_BY = 'agentBridge.revertAgentChangesSince';

type Node = Checkpoint | { checkpoint: Checkpoint; delta: CellDelta };

const fileName = (uri: string) => decodeURIComponent(uri.split('/').pop() ?? uri);
const clock = (at: number) => new Date(at).toLocaleTimeString([], { hour12: false });

/** Cells left alone named one by one up to this many; beyond, counted by reason. */
const NAMED_SKIPS = 5;

/** Tells the person what a revert did: what went back, and which cells it left alone and why. */
function report(results: readonly RevertResult[]): void {
  const reverted = results.reduce((n, r) => n + r.reverted.length, 0);
  const skipped = results.flatMap((r) => r.skipped);
  const cells = (n: number) => `${n} cell${n === 1 ? '' : 's'}`;
  const head = `Reverted ${cells(reverted)}.`;
  if (!skipped.length) {
    void vscode.window.showInformationMessage(head);
    return;
  }
  const reasons = new Map<string, number>();
  for (const s of skipped) reasons.set(s.why, (reasons.get(s.why) ?? 0) + 1);
  const alone =
    skipped.length <= NAMED_SKIPS
      ? skipped.map((s) => `cell ${s.index + 1} (${s.id}): ${s.why}`)
      : [...reasons].map(([why, n]) => `${cells(n)}: ${why}`);
  void vscode.window.showWarningMessage(`${head} Left alone: ${alone.join('; ')}.`);
}

/**
 * "Agent Changes": the checkpoints to review, newest first, each with the cells it touched.
 * Keep clears one from the list; Revert applies its inverse (one undo step) where its cells are
 * still as the agent left them; a row opens the change in VS Code's notebook diff (a cell's row:
 * that cell's change).
 */
export class ReviewView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly redraw = new vscode.EventEmitter<undefined>();
  readonly onDidChangeTreeData = this.redraw.event;
  private readonly disposables: vscode.Disposable[] = [this.redraw];

  constructor(
    private readonly checkpoints: Checkpoints,
    private readonly diffs: ChangeDiffs,
  ) {
    const view = vscode.window.createTreeView(REVIEW_VIEW_ID, { treeDataProvider: this });
    const badge = () =>
      (view.badge = { value: checkpoints.pending().length, tooltip: `${checkpoints.pending().length} agent changes to review` });
    badge();
    this.disposables.push(
      view,
      checkpoints.onDidChange(() => {
        badge();
        this.redraw.fire(undefined);
      }),
      vscode.commands.registerCommand(SHOW_CHECKPOINT, (n: Node | number, cellId?: string) => this.show(n, cellId)),
      vscode.commands.registerCommand(KEEP_CHANGE, (n: Node | number) => this.keep(n)),
      vscode.commands.registerCommand(REVERT_CHANGE, (n: Node | number) => this.revert(n)),
      vscode.commands.registerCommand(REVERT_CELL_CHANGE, (n: Node) => ('delta' in n ? this.revert(n, n.delta.id) : undefined)),
      vscode.commands.registerCommand(REVERT_ALL_BY, (who?: string, since?: number) => this.revertAllBy(who, since)),
    );
  }

  getChildren(node?: Node): Node[] {
    if (!node) return this.checkpoints.pending();
    return 'delta' in node ? [] : node.cells.map((delta) => ({ checkpoint: node, delta }));
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if ('delta' in node) {
      const { delta } = node;
      const face = delta.after ?? delta.before!;
      const item = new vscode.TreeItem(`cell ${face.index + 1} ${deltaKind(delta)}`);
      item.description = face.code.split('\n')[0]?.slice(0, 60);
      item.tooltip = `Show this cell's change in the notebook; revert it alone, and the rest of the change stays to review.`;
      item.contextValue = 'agentChange.cell';
      item.command = { title: 'Show', command: SHOW_CHECKPOINT, arguments: [node.checkpoint.id, delta.id] };
      return item;
    }
    const item = new vscode.TreeItem(`${node.client}: ${node.summary}`, vscode.TreeItemCollapsibleState.Collapsed);
    item.id = `checkpoint-${node.id}`;
    const cut = node.applying ? ' · cut short' : '';
    item.description = `${fileName(node.notebook)} · ${clock(node.at)} (${ago(node.at)})${cut}`;
    item.tooltip =
      `${node.client} changed ${fileName(node.notebook)} at ${new Date(node.at).toLocaleString()}: ${node.summary}.` +
      (node.about ? ` By ${node.about}.` : '') +
      (this.checkpoints.earlier(node) ? ' Made before the editor restarted: no agent can undo it now.' : '') +
      (node.applying ? ' The editor stopped while this batch was applied in steps: part of it may be applied.' : '') +
      ' Keep it, or revert it where its cells are still as the agent left them.';
    item.contextValue = 'agentChange';
    item.iconPath = new vscode.ThemeIcon('hubot');
    item.command = { title: 'Show', command: SHOW_CHECKPOINT, arguments: [node.id] };
    return item;
  }

  private pick(n: Node | number): Checkpoint | undefined {
    if (typeof n === 'number') return this.checkpoints.get(n);
    return 'delta' in n ? n.checkpoint : n;
  }

  /** The notebook before and after the change (or the change to one of its cells) in VS Code's notebook diff. */
  async show(n: Node | number, cellId?: string): Promise<void> {
    const checkpoint = this.pick(n);
    if (!checkpoint) {
      void vscode.window.showInformationMessage(
        'This agent change is no longer listed: it was reverted, or dropped as the list grew.',
      );
      return;
    }
    const delta = checkpoint.cells.find((d) => d.id === cellId);
    const what = delta ? `cell ${(delta.after ?? delta.before)!.index + 1} ${deltaKind(delta)}` : checkpoint.summary;
    const title = `${checkpoint.client}: ${what} (${fileName(checkpoint.notebook)}, ${clock(checkpoint.at)})`;
    try {
      await this.diffs.show(checkpoint, title, delta?.id);
    } catch (error) {
      void vscode.window.showErrorMessage(`Cannot show the agent's change: ${errorMessage(error)}`);
    }
  }

  private keep(n: Node | number): void {
    const checkpoint = this.pick(n);
    if (checkpoint) this.checkpoints.keep(checkpoint.id);
  }

  /** Reverts a change, or one cell of it. */
  private async revert(n: Node | number, cellId?: string): Promise<RevertResult | undefined> {
    const checkpoint = this.pick(n);
    if (!checkpoint) return undefined;
    const results = await this.reporting(async () => [await this.checkpoints.revert(checkpoint.id, cellId)]);
    return results?.[0];
  }

  /**
   * "Revert all changes by <agent> since <time>": the agent (`who`: its credential's key, else its
   * name; see Checkpoints.whose) and the first change to go are picked from the list.
   */
  private async revertAllBy(who?: string, since?: number): Promise<RevertResult[] | undefined> {
    const pending = this.checkpoints.pending();
    if (who === undefined) {
      const agents = new Map(pending.map((c) => [Checkpoints.whose(c), c]));
      who = (
        await vscode.window.showQuickPick(
          [...agents].map(([key, c]) => ({ label: c.client, description: c.about, key })),
          { title: 'Revert all changes by which agent?' },
        )
      )?.key;
    }
    if (!who) return undefined;
    const theirs = pending.filter((c) => Checkpoints.whose(c) === who);
    if (since === undefined) {
      const from = await vscode.window.showQuickPick(
        theirs.map((c) => ({ label: `since ${clock(c.at)}`, description: `${c.summary} · ${fileName(c.notebook)}`, at: c.at })),
        { title: `Revert every change by ${theirs[0]?.client ?? who} since…` },
      );
      if (!from) return undefined;
      since = from.at;
    }
    const [agent, when] = [who, since];
    return this.reporting(() => this.checkpoints.revertAllBy(agent, when));
  }

  private async reporting(work: () => Promise<RevertResult[]>): Promise<RevertResult[] | undefined> {
    try {
      const results = await work();
      report(results);
      return results;
    } catch (error) {
      void vscode.window.showErrorMessage(`Revert failed: ${error instanceof BridgeError ? error.detail : String(error)}`);
      return undefined;
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
