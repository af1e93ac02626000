import type * as vscode from 'vscode';
import type { Kernel } from '../core/kernel';

/** Why a provider that serves a notebook cannot run code in it now, and what the person can do. */
export class KernelUnavailable {
  constructor(
    readonly status: 409 | 503,
    readonly detail: string,
  ) {}
}

/**
 * One way of reaching a notebook's kernel (our builtin controller, or another extension's
 * exported API). `kernelFor` answers undefined when this provider does not serve that
 * notebook, so the next provider is asked, and KernelUnavailable when it serves it but cannot
 * run code now.
 */
export interface KernelProvider {
  readonly name: string;
  kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable | undefined>;
  /** Fires when the set of notebooks this provider serves may have changed. */
  readonly onDidChange: vscode.Event<void>;
}
