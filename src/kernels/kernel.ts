import type * as vscode from 'vscode';
import type { Kernel } from '../core/kernel';

/**
 * One way of reaching a notebook's kernel (our builtin controller, or another extension's
 * exported API). `kernelFor` answers undefined when this provider does not serve that
 * notebook now, so the next provider is asked.
 */
export interface KernelProvider {
  readonly name: string;
  kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | undefined>;
  /** Fires when the set of notebooks this provider serves may have changed. */
  readonly onDidChange: vscode.Event<void>;
}
