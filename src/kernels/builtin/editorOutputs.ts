import * as vscode from 'vscode';
import type { MimeBundle } from '../../core/model/kernelPort';
import type { DisplayMetadata } from './kernelWire';
import { errorMessage } from '../../core/errorMessage';

const BASE64_MIMES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * A mimebundle as editor outputs: one output, richest item first so VS Code renders it by
 * default, then a stderr note for each item VS Code rejects (a mime type such as `x`, `not a
 * mime` or one with CR/LF): one bad item must not throw out of the run, which would leave the
 * cell running for ever. With an execution count the output is the cell's value (Jupyter's
 * execute_result), else a display_data: VS Code's .ipynb serializer reads which from the
 * output's metadata.
 */
export function bundleToOutputs(
  bundle: MimeBundle,
  metadata?: DisplayMetadata,
  executionCount?: number,
): vscode.NotebookCellOutput[] {
  const mimes = Object.keys(bundle).sort((a, b) => Number(a === 'text/plain') - Number(b === 'text/plain'));
  const items: vscode.NotebookCellOutputItem[] = [];
  const notes: string[] = [];
  for (const mime of mimes) {
    try {
      items.push(bundleItem(mime, bundle[mime]!));
    } catch (err) {
      notes.push(`[Agent Bridge left out the output item ${JSON.stringify(mime)}: VS Code rejects it (${errorMessage(err)})]\n`);
    }
  }
  const jupyter =
    executionCount === undefined
      ? { outputType: 'display_data', metadata: metadata ?? {} }
      : { outputType: 'execute_result', executionCount, metadata: metadata ?? {} };
  const outputs = items.length ? [new vscode.NotebookCellOutput(items, jupyter)] : [];
  if (notes.length) outputs.push(new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stderr(notes.join(''))]));
  return outputs;
}

function bundleItem(mime: string, data: string): vscode.NotebookCellOutputItem {
  // VS Code's own check lets a trailing CR through in some versions; the renderer then fails.
  if (/[\r\n]/.test(mime)) throw new Error('a mime type cannot contain CR or LF');
  if (BASE64_MIMES.has(mime)) return new vscode.NotebookCellOutputItem(Buffer.from(data, 'base64'), mime);
  return vscode.NotebookCellOutputItem.text(data, mime);
}

export function errorOutput(name: string, message: string, traceback: string): vscode.NotebookCellOutput {
  return new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.error({ name, message, stack: traceback })]);
}
