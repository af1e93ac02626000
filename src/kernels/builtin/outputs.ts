import * as vscode from 'vscode';
import type { MimeBundle } from '../../core/kernel';

const BASE64_MIMES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/** A mimebundle as one editor output, richest item first so VS Code renders it by default. */
export function bundleToOutput(bundle: MimeBundle): vscode.NotebookCellOutput {
  const mimes = Object.keys(bundle).sort((a, b) => Number(a === 'text/plain') - Number(b === 'text/plain'));
  return new vscode.NotebookCellOutput(mimes.map((mime) => bundleItem(mime, bundle[mime]!)));
}

function bundleItem(mime: string, data: string): vscode.NotebookCellOutputItem {
  if (BASE64_MIMES.has(mime)) return new vscode.NotebookCellOutputItem(Buffer.from(data, 'base64'), mime);
  return vscode.NotebookCellOutputItem.text(data, mime);
}

export function errorOutput(name: string, message: string, traceback: string): vscode.NotebookCellOutput {
  return new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error({ name, message, stack: traceback })]);
}
