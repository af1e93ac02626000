import * as vscode from 'vscode';
import { KernelUnavailable } from '../kernels/kernel';
import type { CellSnapshot, Disposable, IndexRange, NewCell, NotebookChange, NotebookEntry, OpenNotebooks } from '../core/cells';
import { BridgeError } from '../core/errors';
import type { InterruptHow } from '../core/kernel';
import type { Log } from '../core/log';
import type { BuiltinKernels } from '../kernels/builtin/controller';
import { CellIds } from './cellIds';
import type { Sessions } from './sessions';

const CHANGED_MEANWHILE =
  'The notebook changed while the edit was being applied (someone is typing in it?); nothing was changed. Read the cells again and retry.';

/**
 * The open notebooks of this window, for the cell rules. Edits go through
 * `workspace.applyEdit` exactly as the person's own would (one WorkspaceEdit per request, so
 * one undo step); runs and interrupts go through VS Code's notebook commands, so any kernel
 * the person selected does the work.
 */
export class EditorNotebooks implements OpenNotebooks, vscode.Disposable {
  private readonly ids = new CellIds();

  constructor(
    private readonly sessions: Sessions,
    private readonly builtin: BuiltinKernels,
    private readonly log: Log,
  ) {}

  list(): NotebookEntry[] {
    return vscode.workspace.notebookDocuments.map((notebook) => {
      const session = this.sessions.info(notebook);
      return {
        sessionId: session.id,
        uri: session.uri,
        path: session.path,
        notebookType: notebook.notebookType,
        cellCount: notebook.cellCount,
        dirty: notebook.isDirty,
      };
    });
  }

  async kernel(uri: string): Promise<{ kind: string } | { unavailable: string }> {
    const kernel = await this.sessions.resolveKernel(this.notebook(uri));
    return kernel instanceof KernelUnavailable ? { unavailable: kernel.detail } : { kind: kernel.kind };
  }

  active() {
    const editor = vscode.window.activeNotebookEditor;
    if (!editor) return null;
    const range = (r: vscode.NotebookRange): IndexRange => ({ start: r.start, end: r.end });
    return {
      uri: editor.notebook.uri.toString(),
      selections: editor.selections.map(range),
      visibleRanges: editor.visibleRanges.map(range),
    };
  }

  cells(uri: string): CellSnapshot[] {
    return this.notebook(uri)
      .getCells()
      .map((cell) => ({
        id: this.ids.id(cell),
        kind: cell.kind === vscode.NotebookCellKind.Code ? 'code' : 'markup',
        language: cell.document.languageId,
        code: cell.document.getText(),
        version: this.ids.version(cell),
        execution: this.ids.execution(cell),
        outputs: cell.outputs.map((o) => ({ items: o.items.map((i) => ({ mime: i.mime, data: i.data })) })),
      }));
  }

  /** The stable id of a cell of an open notebook. */
  cellId(cell: vscode.NotebookCell): string {
    return this.ids.id(cell);
  }

  defaultLanguage(uri: string): string {
    // .ipynb keeps nbformat's metadata under `metadata`; other serializers may not have any.
    const meta = this.notebook(uri).metadata as { metadata?: NbMeta } & NbMeta;
    const nb = meta.metadata ?? meta;
    return nb.language_info?.name ?? nb.kernelspec?.language ?? 'python';
  }

  newId(uri: string): string {
    return this.ids.newId(this.notebook(uri));
  }

  async apply(uri: string, change: NotebookChange): Promise<void> {
    const notebook = this.notebook(uri);
    const cells = notebook.getCells();
    if (cells.map((c) => this.ids.id(c)).join('\n') !== change.expectIds.join('\n'))
      throw new BridgeError(409, CHANGED_MEANWHILE);

    // Structure first: text edits bump the notebook's version, which VS Code checks before
    // applying cell edits (it checks each cell text's own version before its text edit).
    const edit = new vscode.WorkspaceEdit();
    if (change.splices.length) {
      edit.set(
        notebook.uri,
        change.splices.map((s) =>
          vscode.NotebookEdit.replaceCells(
            new vscode.NotebookRange(s.start, s.end),
            s.cells.map((c) => cellData(c, cells)),
          ),
        ),
      );
    }
    for (const t of change.texts) {
      const document = cells[t.index]!.document;
      edit.replace(document.uri, fullRange(document), t.code);
    }
    if (!(await vscode.workspace.applyEdit(edit))) throw new BridgeError(409, CHANGED_MEANWHILE);

    // Cells VS Code created for our copies take over the ids (and history) of their originals.
    const created = new Map(change.splices.flatMap((s) => s.cells).map((c) => [c.id, c]));
    if (notebook.cellCount !== change.resultIds.length) {
      this.log.warn(`cell edit of ${uri}: expected ${change.resultIds.length} cells, found ${notebook.cellCount}`);
    }
    change.resultIds.forEach((id, index) => {
      const c = created.get(id);
      if (c && index < notebook.cellCount)
        this.ids.adopt(notebook.cellAt(index), id, c.version, c.copyOf === undefined ? undefined : cells[c.copyOf]);
    });
  }

  async execute(uri: string, ids: readonly string[]): Promise<void> {
    const notebook = this.notebook(uri);
    const cells = notebook.getCells();
    const ranges = ids.map((id) => cells.findIndex((c) => this.ids.id(c) === id)).map((i) => ({ start: i, end: i + 1 }));
    await this.showEditor(notebook);
    // The command resolves only when the cells are done (for some kernels): don't wait for it.
    void vscode.commands
      .executeCommand('notebook.cell.execute', { ranges, document: notebook.uri })
      .then(undefined, (error: unknown) => {
        this.log.warn(`running cells of ${uri} failed: ${error instanceof Error ? error.message : String(error)}`);
      });
  }

  onDidChange(uri: string, listener: () => void): Disposable {
    return this.ids.onDidChange((notebook) => {
      if (notebook.uri.toString() === uri) listener();
    });
  }

  async interrupt(uri: string): Promise<InterruptHow> {
    const notebook = this.notebook(uri);
    if (await this.builtin.kernelFor(notebook)) return this.builtin.interrupt(notebook);
    await this.showEditor(notebook);
    await vscode.commands.executeCommand('notebook.cancelExecution', notebook.uri);
    return 'sigint';
  }

  async restart(uri: string): Promise<void> {
    const notebook = this.notebook(uri);
    if (!(await this.builtin.kernelFor(notebook))) {
      throw new BridgeError(
        409,
        `Restart through the bridge works for the "Agent Bridge Python" kernel only; ${labelOf(notebook)} uses another kernel ` +
          '(or none): restart it from the notebook toolbar. POST /notebooks/interrupt works for any kernel.',
      );
    }
    await this.builtin.restart(notebook);
  }

  /**
   * VS Code's notebook commands act on the editor showing the notebook, or else on the active
   * one: make sure the notebook has an editor (shown without taking focus).
   */
  private async showEditor(notebook: vscode.NotebookDocument): Promise<void> {
    if (vscode.window.visibleNotebookEditors.some((e) => e.notebook === notebook)) return;
    await vscode.window.showNotebookDocument(notebook, { preserveFocus: true, preview: false });
  }

  private notebook(uri: string): vscode.NotebookDocument {
    const notebook = vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri);
    if (!notebook) throw new BridgeError(404, `The notebook ${uri} was closed`);
    return notebook;
  }

  dispose(): void {
    this.ids.dispose();
  }
}

interface NbMeta {
  language_info?: { name?: string };
  kernelspec?: { language?: string };
}

function labelOf(notebook: vscode.NotebookDocument): string {
  return notebook.uri.scheme === 'file' ? notebook.uri.fsPath : notebook.uri.toString();
}

function fullRange(document: vscode.TextDocument): vscode.Range {
  return new vscode.Range(new vscode.Position(0, 0), document.lineAt(Math.max(0, document.lineCount - 1)).range.end);
}

/** A new cell, or a copy of an existing one that keeps its outputs, metadata and last run. */
function cellData(c: NewCell, cells: readonly vscode.NotebookCell[]): vscode.NotebookCellData {
  const data = new vscode.NotebookCellData(
    c.kind === 'code' ? vscode.NotebookCellKind.Code : vscode.NotebookCellKind.Markup,
    c.code,
    c.language,
  );
  const source = c.copyOf === undefined ? undefined : cells[c.copyOf];
  if (source) {
    data.metadata = { ...source.metadata };
    if (c.kind === 'code' && source.kind === vscode.NotebookCellKind.Code) {
      data.outputs = [...source.outputs];
      if (source.executionSummary) data.executionSummary = source.executionSummary;
    }
  }
  return data;
}
