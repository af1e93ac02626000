import * as vscode from 'vscode';
import { changeSide, type Side } from '../core/cells/changeSides';
import {
  asTheAgentLeftIt,
  outputSummary,
  type CellDelta,
  type CellFace,
  type Checkpoint,
  type Checkpoints,
} from '../core/cells/checkpoints';
import type { CellSnapshot } from '../core/model/cellService';
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

/** The cells of a change shown: all, or the one named. */
const partOf = (checkpoint: Checkpoint, cellId: string | undefined): readonly CellDelta[] =>
  cellId === undefined ? checkpoint.cells : checkpoint.cells.filter((d) => d.id === cellId);

/** A side as served: its bytes, and its cells as the notebook shows them, outputs included. */
interface Served {
  readonly bytes: Uint8Array;
  readonly mtime: number;
  readonly cells: vscode.NotebookCellData[];
}

/**
 * The person's review of an agent's change in VS Code's own notebook diff editor (the one Source
 * Control opens for a notebook). The left side is the notebook before the change: the notebook
 * now, with the change's cells put back as they were (changeSides.ts), served as a notebook of
 * the document's own type through this read-only file system, in the bytes of that type's own
 * serializer. The right side is the notebook itself while it is as the agent left it (VS Code's
 * own per-cell revert then works on it); once someone changed those cells since, it is served
 * too, as the agent left it. A change to one cell shows only that cell changed, in the whole
 * notebook.
 *
 * Outputs: VS Code's `vscode.executeNotebookToData` loses the bytes of output items on the way
 * to the serializer (the .ipynb one then fails), so a side's bytes carry no outputs; once VS
 * Code opened the side, its cells are put in whole, outputs and all, by an edit (an edit leaves
 * a notebook of a read-only file system unchanged on disk and not dirty).
 */
export class ChangeDiffs implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly sides = new Map<string, Served>();
  private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  /** Never fires: a side changes only by an edit of the open document (a reload would drop its outputs). */
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
      // A side VS Code opens by itself (a diff restored with the window) gets its outputs too.
      vscode.workspace.onDidOpenNotebookDocument((notebook) => void this.fill(notebook.uri)),
    );
  }

  /** Opens the notebook diff of a change, or of one cell of it. */
  async show(checkpoint: Checkpoint, title: string, cellId?: string): Promise<void> {
    const notebook = await vscode.workspace.openNotebookDocument(vscode.Uri.parse(checkpoint.notebook));
    const part = partOf(checkpoint, cellId);
    // The document's cells and the rules' view of them, read in the same turn: the same cells.
    const cells = notebook.getCells();
    const now = this.cellsOf(notebook);
    const serve = async (side: Side) => {
      const uri = sideUri(checkpoint, cellId, side);
      this.keep(uri, await sideOf(notebook, cells, now, checkpoint, part, side));
      await vscode.workspace.openNotebookDocument(uri);
      await this.fill(uri);
      return uri;
    };
    const before = await serve('before');
    const after = asTheAgentLeftIt(checkpoint, now, part) ? notebook.uri : await serve('after');
    // [group, editor options]: in the active group, as a preview, in the notebook type's own editor.
    await vscode.commands.executeCommand(OPEN_DIFF, before, after, title, [
      vscode.ViewColumn.Active,
      { override: notebook.notebookType, pinned: false },
    ]);
  }

  /** Puts a served side's cells, outputs included, into its open document. */
  private async fill(uri: vscode.Uri): Promise<void> {
    const served = uri.scheme === CHANGE_SCHEME ? this.sides.get(uri.toString()) : undefined;
    const side = served && vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri.toString());
    if (!served || !side) return;
    const edit = new vscode.WorkspaceEdit();
    edit.set(uri, [vscode.NotebookEdit.replaceCells(new vscode.NotebookRange(0, side.cellCount), served.cells)]);
    await vscode.workspace.applyEdit(edit);
  }

  private keep(uri: vscode.Uri, side: Omit<Served, 'mtime'>): void {
    const key = uri.toString();
    this.sides.delete(key);
    this.sides.set(key, { ...side, mtime: Date.now() });
    if (this.sides.size > KEPT_SIDES) this.sides.delete(this.sides.keys().next().value!);
  }

  private async read(uri: vscode.Uri): Promise<Served> {
    const kept = this.sides.get(uri.toString());
    if (kept) return kept;
    // Not kept (many diffs opened since, or a window reload restoring the editor): built again.
    const parsed = parseSideUri(uri);
    const checkpoint = parsed && this.checkpoints.get(parsed.checkpoint);
    if (!parsed || !checkpoint) throw vscode.FileSystemError.FileNotFound(uri);
    const notebook = await vscode.workspace.openNotebookDocument(vscode.Uri.parse(checkpoint.notebook));
    const part = partOf(checkpoint, parsed.cellId);
    this.keep(uri, await sideOf(notebook, notebook.getCells(), this.cellsOf(notebook), checkpoint, part, parsed.side));
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

/** The outputs a side shows: the cell's own when it still has them, else the summary the checkpoint kept. */
function outputsOf(face: CellFace, like: vscode.NotebookCell | undefined, side: Side): vscode.NotebookCellOutput[] | undefined {
  if (like && outputSummary(like.outputs) === face.outputs) return undefined;
  if (face.outputs === outputSummary([])) return [];
  const when = side === 'before' ? 'before the change' : 'as the agent left it';
  return [
    new vscode.NotebookCellOutput([
      vscode.NotebookCellOutputItem.text(`${face.outputs}\n(the summary kept of its outputs ${when})`),
    ]),
  ];
}

/** One side: its cells, and its bytes (without outputs) as the notebook type's own serializer writes them. */
async function sideOf(
  notebook: vscode.NotebookDocument,
  cells: readonly vscode.NotebookCell[],
  now: readonly CellSnapshot[],
  checkpoint: Checkpoint,
  part: readonly CellDelta[],
  side: Side,
): Promise<Omit<Served, 'mtime'>> {
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
  const bare = new vscode.NotebookData(
    data.map((c) => {
      const copy = new vscode.NotebookCellData(c.kind, c.value, c.languageId);
      copy.metadata = c.metadata;
      copy.executionSummary = c.executionSummary;
      return copy;
    }),
  );
  bare.metadata = notebook.metadata;
  const bytes = await vscode.commands.executeCommand<Uint8Array>('vscode.executeNotebookToData', notebook.notebookType, bare);
  return { bytes, cells: data };
}
