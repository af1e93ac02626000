import type * as vscode from 'vscode';
import type { RawOutput, RawOutputItem } from '../../core/cells';

/**
 * What a cell execution told the editor to show, kept as the editor's document will have it once
 * the workbench applied the edits: the run's end can be reported before that round trip.
 */
export class ShownOutputs {
  private readonly outputs: { source: vscode.NotebookCellOutput; items: RawOutputItem[] }[] = [];

  clear(): void {
    this.outputs.length = 0;
  }

  append(outputs: readonly vscode.NotebookCellOutput[]): void {
    for (const source of outputs) this.outputs.push({ source, items: source.items.map(raw) });
  }

  /** Items appended to an output shown before (a stream continued). */
  appendItems(item: vscode.NotebookCellOutputItem, to: vscode.NotebookCellOutput): void {
    this.outputs.find((o) => o.source === to)?.items.push(raw(item));
  }

  list(): RawOutput[] {
    return this.outputs.map((o) => ({ items: [...o.items] }));
  }
}

const raw = (item: vscode.NotebookCellOutputItem): RawOutputItem => ({ mime: item.mime, data: item.data });
