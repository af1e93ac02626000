import * as vscode from 'vscode';
import type { MimeBundle } from '../../core/kernel';
import type { DisplayMetadata } from './kernelProcess';

const BASE64_MIMES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * A mimebundle as one editor output, richest item first so VS Code renders it by default. With
 * an execution count it is the cell's value (Jupyter's execute_result), else a display_data:
 * VS Code's .ipynb serializer reads which from the output's metadata.
 */
export function bundleToOutput(
  bundle: MimeBundle,
  metadata?: DisplayMetadata,
  executionCount?: number,
): vscode.NotebookCellOutput {
  const mimes = Object.keys(bundle).sort((a, b) => Number(a === 'text/plain') - Number(b === 'text/plain'));
  const jupyter =
    executionCount === undefined
      ? { outputType: 'display_data', metadata: metadata ?? {} }
      : { outputType: 'execute_result', executionCount, metadata: metadata ?? {} };
  return new vscode.NotebookCellOutput(
    mimes.map((mime) => bundleItem(mime, bundle[mime]!)),
    jupyter,
  );
}

function bundleItem(mime: string, data: string): vscode.NotebookCellOutputItem {
  if (BASE64_MIMES.has(mime)) return new vscode.NotebookCellOutputItem(Buffer.from(data, 'base64'), mime);
  return vscode.NotebookCellOutputItem.text(data, mime);
}

export function errorOutput(name: string, message: string, traceback: string): vscode.NotebookCellOutput {
  return new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error({ name, message, stack: traceback })]);
}
