import { realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import * as vscode from 'vscode';
import type { NotebookEntry } from '../core/model/cellService';
import { BridgeError } from '../core/bridgeError';
import type { Kernel } from '../core/model/kernelPort';
import { KeyedQueue } from '../core/flow/keyedQueue';
import { notebookLabel, resolveNotebook } from '../core/cells/refs';
import type { KernelChoice, NotebookHost, SessionInfo, StartedKernel } from '../core/model/notebookHost';
import { KernelUnavailable, type KernelProvider } from '../kernels/kernelProvider';
import { freshId } from '../core/ids';
import { keepsFileIds } from './cellIds';

/**
 * Notebooks on a read-only file system (a diff's other side: Source Control's `git:` version, the
 * before of an agent's change under review) are not agents' to read or change: an edit there
 * lands in the editor's copy only, and would change what the person reviews.
 */
const isServed = (notebook: vscode.NotebookDocument) => vscode.workspace.fs.isWritableFileSystem(notebook.uri.scheme) !== false;
const served = () => vscode.workspace.notebookDocuments.filter(isServed);

/**
 * The registry of open notebooks: each has a session id (marimo-style), minted when it opens and
 * kept until it closes, and one label. Every transport and the activity record find a notebook
 * by session id, path or uri here (with core's rules, resolveNotebook) and name it with `label`.
 * Kernels are looked up per request through the providers, in order.
 */
export class Sessions implements NotebookHost, vscode.Disposable {
  private readonly idByNotebook = new Map<vscode.NotebookDocument, string>();
  private readonly notebookById = new Map<string, vscode.NotebookDocument>();
  private readonly changed = new vscode.EventEmitter<void>();
  /** Fires when the list of sessions may have changed (open, close, kernel selection). */
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [this.changed];
  private readonly opening = new KeyedQueue();

  constructor(
    private readonly providers: readonly KernelProvider[],
    /** Folders besides the workspace folders where `open` may open notebooks (a setting). */
    private readonly openFolders: () => readonly string[] = () => [],
  ) {
    for (const notebook of served()) this.track(notebook);
    this.disposables.push(
      vscode.workspace.onDidOpenNotebookDocument((notebook) => {
        if (!isServed(notebook)) return;
        this.track(notebook);
        this.changed.fire();
      }),
      vscode.workspace.onDidCloseNotebookDocument((notebook) => {
        const id = this.idByNotebook.get(notebook);
        if (id) this.notebookById.delete(id);
        this.idByNotebook.delete(notebook);
        this.changed.fire();
      }),
      ...providers.map((p) => p.onDidChange(() => this.changed.fire())),
    );
  }

  async sessions(): Promise<SessionInfo[]> {
    const notebooks = [...this.idByNotebook.keys()];
    const usable = await Promise.all(notebooks.map(async (nb) => !((await this.resolveKernel(nb)) instanceof KernelUnavailable)));
    return notebooks.filter((_, i) => usable[i]).map((nb) => this.info(nb));
  }

  async kernelFor(sessionId: string): Promise<Kernel> {
    const notebook = this.notebookById.get(sessionId);
    if (!notebook) {
      const open = this.entries().map((n) => `${n.sessionId} (${notebookLabel(n)})`);
      throw new BridgeError(
        'not_found',
        `Invalid session id: ${sessionId}; ${open.length ? `the open notebooks are ${open.join(', ')}` : 'no notebook is open'} (GET /api/sessions lists those a kernel serves)`,
      );
    }
    const kernel = await this.resolveKernel(notebook);
    if (kernel instanceof KernelUnavailable) throw new BridgeError(kernel.outcome, `${this.label(notebook)}: ${kernel.detail}`);
    return kernel;
  }

  /** One open at a time: VS Code fails to create two notebook editors at once. */
  open(path: string, options: { kernel?: KernelChoice | undefined }): Promise<SessionInfo> {
    if (!isAbsolute(path)) return Promise.reject(new BridgeError('bad_input', `"path" must be absolute (got ${path})`));
    return this.opening.run('open', async () => {
      await this.checkOpenable(path);
      return (await this.openNow(vscode.Uri.file(path), options.kernel)).session;
    });
  }

  /** Selects and starts a kernel for a notebook named by session id or absolute path (opening it if needed). */
  startKernel(notebook: string, kernel: KernelChoice): Promise<StartedKernel> {
    const open = this.notebookById.get(notebook);
    if (!open && !isAbsolute(notebook))
      return Promise.reject(
        new BridgeError('not_found', `No open notebook has the session id ${notebook}; give a session id or an absolute path`),
      );
    return this.opening.run('open', async () => {
      if (!open) await this.checkOpenable(notebook);
      const { session, document } = await this.openNow(open?.uri ?? vscode.Uri.file(notebook), kernel);
      const running = await this.resolveKernel(document);
      if (running instanceof KernelUnavailable)
        throw new BridgeError(running.outcome, `${this.label(document)}: ${running.detail}`);
      return { session, kernel: running.kind };
    });
  }

  /**
   * Only inside the workspace folders and the configured ones (symlinks resolved). Outside, the
   * answer is the same whether the path exists or not.
   */
  private async checkOpenable(path: string): Promise<void> {
    const real = async (p: string) => realpath(p).catch(() => resolve(p));
    const folders = [
      ...(vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath),
      ...this.openFolders().filter((f) => isAbsolute(f)),
    ];
    const target = await real(path);
    const roots = await Promise.all(folders.map(real));
    if (roots.some((root) => isInside(target, root))) return;
    throw new BridgeError(
      'forbidden',
      `Opening ${path} is not allowed: agents may open notebooks inside the workspace folders` +
        (folders.length ? ` (${folders.join(', ')})` : ' (none is open)') +
        ' and the folders of the setting agentBridge.openFolders. Ask the person to open it, or to add its folder to that setting.',
    );
  }

  private async openNow(uri: vscode.Uri, kernel: KernelChoice | undefined) {
    let notebook: vscode.NotebookDocument;
    try {
      notebook = await vscode.workspace.openNotebookDocument(uri);
    } catch {
      // VS Code's reason can quote the file (a JSON parse error): it is not passed on.
      throw new BridgeError(
        'not_found',
        `Cannot open ${uri.fsPath} as a notebook: no such file, or not a notebook VS Code can read (.ipynb, or a type an installed extension serves)`,
      );
    }
    const editor = await vscode.window.showNotebookDocument(notebook, { preserveFocus: true, preview: false });
    if (kernel) {
      const provider = this.providers.find((p) => p.name === kernel);
      if (!provider) throw new BridgeError('bad_input', `Unknown kernel "${kernel}"`);
      await provider.start(editor);
    }
    this.track(notebook);
    return { session: this.info(notebook), document: notebook };
  }

  /** The open notebook a request names (session id, path or uri; none: the only one open), if any. */
  find(named: string | undefined): vscode.NotebookDocument | undefined {
    const byId = named === undefined ? undefined : this.notebookById.get(named);
    if (byId) return byId;
    try {
      const { uri } = resolveNotebook(this.entries(), named);
      return served().find((n) => n.uri.toString() === uri);
    } catch {
      return undefined;
    }
  }

  /** The open notebooks as the cell rules list them. */
  entries(): NotebookEntry[] {
    return served().map((notebook) => {
      const session = this.info(notebook);
      return {
        sessionId: session.id,
        uri: session.uri,
        path: session.path,
        notebookType: notebook.notebookType,
        cellCount: notebook.cellCount,
        dirty: notebook.isDirty,
        idsPersist: keepsFileIds(notebook),
      };
    });
  }

  /** How the notebook is named to agents and to the person: its path, else its uri. */
  label(notebook: vscode.NotebookDocument): string {
    return notebookLabel(this.info(notebook));
  }

  /** The session of a notebook (minting its id if new). */
  info(notebook: vscode.NotebookDocument): SessionInfo {
    return {
      id: this.track(notebook),
      path: notebook.uri.scheme === 'file' ? notebook.uri.fsPath : null,
      uri: notebook.uri.toString(),
      notebookType: notebook.notebookType,
    };
  }

  /** The first provider's kernel; else the first reason given; else a hint to pick one. */
  async resolveKernel(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable> {
    let unavailable: KernelUnavailable | undefined;
    for (const provider of this.providers) {
      const answer = await provider.kernelFor(notebook);
      if (answer instanceof KernelUnavailable) unavailable ??= answer;
      else if (answer) return answer;
    }
    return (
      unavailable ??
      new KernelUnavailable(
        'conflict',
        'no kernel is selected: pick one with "Notebook: Select Notebook Kernel" (for .ipynb files "Agent Bridge Python" works with any python3)',
      )
    );
  }

  private track(notebook: vscode.NotebookDocument): string {
    let id = this.idByNotebook.get(notebook);
    if (!id) {
      id = freshId('s_', 6, this.notebookById);
      this.idByNotebook.set(notebook, id);
      this.notebookById.set(id, notebook);
    }
    return id;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

/** `target` is `root` or below it. */
function isInside(target: string, root: string): boolean {
  const rel = relative(root, target);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}
