import * as vscode from 'vscode';
import { changeSide } from '../core/changeSides';
import {
  asTheAgentLeftIt,
  outputSummary,
  type CellDelta,
  type CellFace,
  type Checkpoint,
  type Checkpoints,
} from '../core/checkpoints';
import type { CellSnapshot } from '../core/cellService';
import { cellDataLike, copyOf } from '../notebooks/editorNotebooks';

export const CHANGE_SCHEME = 'agent-bridge-change';
/**
 * The command behind `vscode.diff`, which takes the editor to open the two sides in. The public
 * `vscode.diff` can only force the text editor: a marimo `.py` notebook, whose notebook editor
 * is an option and not the default, would open as a text diff of its source.
 */
const OPEN_DIFF = '_workbench.diff';
/** Sides kept in memory; one no longer kept is built again from its checkpoint when VS Code reads it. */
const KEPT_SIDES = 8;

type Side = 'before' | 'after';
/** A side's folder, which VS Code's breadcrumbs show above the diff. */
const FOLDERS: Record<Side, string> = { before: 'before', after: 'as the agent left it' };

/** Where a side is served: `/change <checkpoint>[, cell <id>]/<side's folder>/<the notebook's file name>`. */
function sideUri(checkpoint: Checkpoint, cellId: string | undefined, side: Side): vscode.Uri {
  const name = vscode.Uri.parse(checkpoint.notebook).path.split('/').pop() ?? 'notebook';
  const change = `change ${checkpoint.id}${cellId === undefined ? '' : `, cell ${cellId}`}`;
  return vscode.Uri.from({ scheme: CHANGE_SCHEME, path: `/${change}/${FOLDERS[side]}/${name}` });
}

function parseSideUri(uri: vscode.Uri): { checkpoint: number; cellId: string | undefined; side: Side } | undefined {
  const m = /^\/change (\d+)(?:, cell ([^/]+))?\/([^/]+)\/[^/]+$/.exec(uri.path);
  const side = m && (Object.keys(FOLDERS) as Side[]).find((s) => FOLDERS[s] === m[3]);
  return m && side ? { checkpoint: Number(m[1]), cellId: m[2], side } : undefined;
}

/** The outputs a side shows: the cell's own when it still has them, else the summary the checkpoint kept. */
function outputsOf(face: CellFace, like: vscode.NotebookCell | undefined, side: Side): vscode.NotebookCellOutput[] | undefined {
  if (like && outputSummary(like.outputs) === face.outputs) return undefined;
  if (face.outputs === outputSummary([])) return [];
  const when = side === 'before' ? 'Before the change' : 'As the agent left it';
  return [
    new vscode.NotebookCellOutput([
      vscode.NotebookCellOutputItem.text(`${when}: ${face.outputs} (a changed cell's outputs are kept as this summary only)`),
    ]),
  ];
}

/**
 * The person's review of an agent's change in VS Code's own notebook diff editor (the one Source
 * Control opens for a notebook): the left side is the notebook before the change (the notebook
 * now, with the change's cells put back as they were), served as a notebook of the document's
 * own type through this read-only file system, in the bytes of that type's own serializer. The
 * right side is the notebook itself while it is as the agent left it (so VS Code's own per-cell
 * revert works on it); once someone changed those cells since, it is served too, as the agent
 * left it. A change to one cell shows only that cell changed, in the whole notebook.
 */
export class ChangeDiffs implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly sides = new Map<string, { bytes: Uint8Array; mtime: number }>();
  private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];

  constructor(
    private readonly checkpoints: Checkpoints,
    /** The cells of an open notebook as the cell rules see them (ids, content), in order. */
    private readonly cellsOf: (notebook: vscode.NotebookDocument) => CellSnapshot[],
  ) {
    this.disposables.push(
      vscode.workspace.registerFileSystemProvider(CHANGE_SCHEME, this, {
        isCaseSensitive: true,
        isReadonly: new vscode.MarkdownString("An agent's change as Agent Bridge recorded it, for review: it cannot be edited."),
      }),
    );
  }

  /** Opens the notebook diff of a change, or of one cell of it. */
  async show(checkpoint: Checkpoint, title: string, cellId?: string): Promise<void> {
    const notebook = await vscode.workspace.openNotebookDocument(vscode.Uri.parse(checkpoint.notebook));
    const { before, after } = await this.build(checkpoint, cellId, notebook);
    // [group, editor options]: in the active group, as a preview, in the notebook type's own editor.
    await vscode.commands.executeCommand(OPEN_DIFF, before, after, title, [
      vscode.ViewColumn.Active,
      { override: notebook.notebookType, pinned: false },
    ]);
  }

  /** Serves the before side (and the after side where the notebook is no longer as the agent left it). */
  private async build(
    checkpoint: Checkpoint,
    cellId: string | undefined,
    notebook: vscode.NotebookDocument,
  ): Promise<{ before: vscode.Uri; after: vscode.Uri }> {
    const part = partOf(checkpoint, cellId);
    // The document's cells and the rules' view of them, read in the same turn: the same cells.
    const cells = notebook.getCells();
    const now = this.cellsOf(notebook);
    const serve = async (side: Side) => {
      const uri = sideUri(checkpoint, cellId, side);
      this.keep(uri, await sideBytes(notebook, cells, now, checkpoint, part, side));
      return uri;
    };
    const before = await serve('before');
    const after = asTheAgentLeftIt(checkpoint, now, part) ? notebook.uri : await serve('after');
    return { before, after };
  }

  private keep(uri: vscode.Uri, bytes: Uint8Array): void {
    const key = uri.toString();
    const known = this.sides.delete(key);
    this.sides.set(key, { bytes, mtime: Date.now() });
    if (this.sides.size > KEPT_SIDES) this.sides.delete(this.sides.keys().next().value!);
    // An editor showing an earlier build of this side reads it again.
    if (known) this.changed.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  private async read(uri: vscode.Uri): Promise<{ bytes: Uint8Array; mtime: number }> {
    const kept = this.sides.get(uri.toString());
    if (kept) return kept;
    // Not kept (many diffs opened since, or a window reload restoring the editor): built again.
    const parsed = parseSideUri(uri);
    const checkpoint = parsed && this.checkpoints.get(parsed.checkpoint);
    if (!parsed || !checkpoint) throw vscode.FileSystemError.FileNotFound(uri);
    const notebook = await vscode.workspace.openNotebookDocument(vscode.Uri.parse(checkpoint.notebook));
    const part = partOf(checkpoint, parsed.cellId);
    this.keep(uri, await sideBytes(notebook, notebook.getCells(), this.cellsOf(notebook), checkpoint, part, parsed.side));
    return this.sides.get(uri.toString())!;
  }

  async stat(uri: vscode.Uri): Promise<vscode.FileStat> {
    const { bytes, mtime } = await this.read(uri);
    return { type: vscode.FileType.File, ctime: mtime, mtime, size: bytes.byteLength };
  }

  async readFile(uri: vscode.Uri): Promise<Uint8Array> {
    return (await this.read(uri)).bytes;
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  writeFile(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  delete(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

/** The cells of a change shown: all, or the one named. */
const partOf = (checkpoint: Checkpoint, cellId: string | undefined): readonly CellDelta[] =>
  cellId === undefined ? checkpoint.cells : checkpoint.cells.filter((d) => d.id === cellId);

/** One side as the bytes of the notebook's own type, written by that type's own serializer. */
async function sideBytes(
  notebook: vscode.NotebookDocument,
  cells: readonly vscode.NotebookCell[],
  now: readonly CellSnapshot[],
  checkpoint: Checkpoint,
  part: readonly CellDelta[],
  side: Side,
): Promise<Uint8Array> {
  const byId = new Map(now.map((c, i) => [c.id, cells[i]]));
  const data = changeSide(
    checkpoint.cells,
    now.map((c) => c.id),
    side,
    part,
  ).map((c) => {
    if ('now' in c) return copyOf(cells[c.now]!, notebook);
    const like = byId.get(c.id);
    const cell = cellDataLike(notebook, { id: c.id, ...c.face }, like);
    const outputs = outputsOf(c.face, like, side);
    if (outputs) {
      cell.outputs = outputs;
      cell.executionSummary = undefined;
    }
    return cell;
  });
  const whole = new vscode.NotebookData(data);
  whole.metadata = notebook.metadata;
  return vscode.commands.executeCommand<Uint8Array>('vscode.executeNotebookToData', notebook.notebookType, whole);
}
