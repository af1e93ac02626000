import * as vscode from 'vscode';

/**
 * The outputs one run sets on its cell, kept beside the execution calls that set them: what the
 * cell shows once the workbench has applied those calls, known before it echoes them back.
 */
export class RunOutputs {
  private readonly list: vscode.NotebookCellOutput[] = [];
  /** Our copy of each output shown, by the output given to VS Code (stream items are appended to it). */
  private readonly copies = new Map<vscode.NotebookCellOutput, vscode.NotebookCellOutput>();

  /** The cell's outputs after every call so far; the same array as they change. */
  get current(): readonly vscode.NotebookCellOutput[] {
    return this.list;
  }

  cleared(): void {
    this.list.length = 0;
    this.copies.clear();
  }

  appended(outputs: readonly vscode.NotebookCellOutput[]): void {
    for (const output of outputs) {
      const copy = new vscode.NotebookCellOutput([...output.items], output.metadata);
      this.copies.set(output, copy);
      this.list.push(copy);
    }
  }

  itemAppended(item: vscode.NotebookCellOutputItem, to: vscode.NotebookCellOutput): void {
    this.copies.get(to)?.items.push(item);
  }
}
