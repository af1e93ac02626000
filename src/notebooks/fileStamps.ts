import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import * as vscode from 'vscode';
import { sleep } from '../core/sleep';

/** A file as the editor last matched it: its modification time and size, and a hash of its bytes. */
interface Stamp {
  mtimeMs: number;
  size: number;
  hash: string;
}

/**
 * What each open notebook's file held when it was last known to match the editor: at open,
 * after each save (ours as soon as it resolves: VS Code's save event can come after the next
 * edit on a busy window), and whenever the notebook is seen clean (VS Code reloads a clean
 * notebook whose file changed). A file whose bytes differ from that, under a dirty notebook,
 * was changed by someone else: saving would overwrite their work. The modification time alone
 * is only a shortcut (unchanged: nothing to read); a newer one with the same bytes is no change.
 *
 * The editor's own saves (auto-save, the person's Ctrl+S) announce themselves before they write
 * (the will-save event, which the workbench awaits before writing), but say they are done only
 * later, and on a busy window after the next edit. Bytes that differ while such a save is under
 * way are the editor's: the comparison waits for its end rather than report a change on disk.
 */
export class FileStamps implements vscode.Disposable {
  private readonly stamps = new Map<string, Promise<Stamp | undefined>>();
  /**
   * Saves the editor announced and has not said were done, per notebook: one timer each (a save
   * that fails says nothing, so none is waited for longer than a slow save takes); `done` settles
   * when the last has ended.
   */
  private readonly saving = new Map<string, { timers: NodeJS.Timeout[]; done: Promise<void>; settle: () => void }>();
  private readonly subscriptions: vscode.Disposable[];

  constructor() {
    for (const notebook of vscode.workspace.notebookDocuments) this.note(notebook);
    this.subscriptions = [
      vscode.workspace.onDidOpenNotebookDocument((n) => this.note(n)),
      vscode.workspace.onWillSaveNotebookDocument((e) => this.willSave(e.notebook)),
      vscode.workspace.onDidSaveNotebookDocument((n) => {
        this.note(n);
        this.saveEnded(n.uri.toString());
      }),
      vscode.workspace.onDidChangeNotebookDocument((e) => {
        if (!e.notebook.isDirty) this.note(e.notebook);
      }),
      vscode.workspace.onDidCloseNotebookDocument((n) => {
        this.stamps.delete(n.uri.toString());
        this.savesEnded(n.uri.toString());
      }),
    ];
  }

  /**
   * How the file's bytes changed since the editor last matched it (for the log: the two
   * modification times and hash heads); undefined when they did not.
   */
  async changedOnDisk(notebook: vscode.NotebookDocument): Promise<string | undefined> {
    if (!(await this.compare(notebook))) return undefined;
    // The editor's save under way, or one whose end was told while the file was read: compared
    // again once it is over, with the stamp its end took.
    await this.saving.get(notebook.uri.toString())?.done;
    return this.compare(notebook);
  }

  private async compare(notebook: vscode.NotebookDocument): Promise<string | undefined> {
    const known = await this.stamps.get(notebook.uri.toString());
    if (!known) return undefined;
    const now = await stampOf(notebook, known);
    if (now === undefined || now.hash === known.hash) return undefined;
    const show = (s: Stamp) => `mtime ${new Date(s.mtimeMs).toISOString()}, sha256 ${s.hash.slice(0, 12)}`;
    return `known: ${show(known)}; on disk: ${show(now)}`;
  }

  /**
   * Whether the editor holds no unsaved change once the saves under way have ended: asked when
   * our save answered false. A save that meets one of the editor's own (an auto-save) waits for
   * it or cancels it, and can answer false though the file is written a moment later. Waits until
   * the notebook is clean, or no announced save is left and CLEAN_WAIT_MS passed.
   */
  async savedMeanwhile(notebook: vscode.NotebookDocument): Promise<boolean> {
    const key = notebook.uri.toString();
    const quiet = (async () => {
      await sleep(CLEAN_WAIT_MS);
      while (this.saving.has(key)) await this.saving.get(key)!.done;
    })();
    const subs: vscode.Disposable[] = [];
    const clean = new Promise<void>((resolve) => {
      const check = () => !notebook.isDirty && resolve();
      subs.push(
        vscode.workspace.onDidChangeNotebookDocument((e) => e.notebook === notebook && check()),
        vscode.workspace.onDidSaveNotebookDocument((n) => n === notebook && check()),
      );
      check();
    });
    try {
      await Promise.race([clean, quiet]);
    } finally {
      for (const sub of subs) sub.dispose();
    }
    if (!notebook.isDirty) await this.saved(notebook);
    return !notebook.isDirty;
  }

  /** The editor just wrote the file (a save of ours resolved). */
  async saved(notebook: vscode.NotebookDocument): Promise<void> {
    this.note(notebook);
    await this.stamps.get(notebook.uri.toString());
  }

  private willSave(notebook: vscode.NotebookDocument): void {
    const key = notebook.uri.toString();
    let saving = this.saving.get(key);
    if (!saving) {
      let settle = () => {};
      const done = new Promise<void>((resolve) => (settle = resolve));
      saving = { timers: [], done, settle };
      this.saving.set(key, saving);
    }
    const timer: NodeJS.Timeout = setTimeout(() => this.saveEnded(key, timer), SAVE_WAIT_MS);
    saving.timers.push(timer);
  }

  /** One announced save ended: the save event (the oldest save's), or its timer. */
  private saveEnded(key: string, timer?: NodeJS.Timeout): void {
    const saving = this.saving.get(key);
    if (!saving) return;
    const at = timer ? saving.timers.indexOf(timer) : 0;
    if (at >= 0) clearTimeout(saving.timers.splice(at, 1)[0]);
    if (!saving.timers.length) this.savesEnded(key);
  }

  private savesEnded(key: string): void {
    const saving = this.saving.get(key);
    if (!saving) return;
    for (const timer of saving.timers) clearTimeout(timer);
    saving.settle();
    this.saving.delete(key);
  }

  private note(notebook: vscode.NotebookDocument): void {
    if (notebook.uri.scheme !== 'file') return;
    const key = notebook.uri.toString();
    const previous = this.stamps.get(key);
    this.stamps.set(
      key,
      (previous ?? Promise.resolve(undefined)).then((known) => stampOf(notebook, known)),
    );
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    for (const key of [...this.saving.keys()]) this.savesEnded(key);
  }
}

/** Longest wait for the end of a save the editor announced. */
const SAVE_WAIT_MS = 10_000;
/** How long a notebook is given to show itself saved after a save that answered false, once no save is under way. */
const CLEAN_WAIT_MS = 1_000;

/** Reads of a file that keeps changing under them before a stamp is given up on. */
const STABLE_READ_TRIES = 5;

/**
 * The file's stamp; its bytes are read only when its modification time is not `known`'s. A read
 * that overlaps a write (the editor writes a file in place, so a read can see part of it) is no
 * stamp: the file must show the same time and size before and after its bytes are read, else it
 * is read again. Undefined when there is no file, or it never held still.
 */
async function stampOf(notebook: vscode.NotebookDocument, known: Stamp | undefined): Promise<Stamp | undefined> {
  const file = notebook.uri.fsPath;
  try {
    for (let tries = 0; tries < STABLE_READ_TRIES; tries++) {
      const before = await stat(file);
      if (known && known.mtimeMs === before.mtimeMs && known.size === before.size) return known;
      const bytes = await readFile(file);
      const after = await stat(file);
      if (after.mtimeMs === before.mtimeMs && after.size === before.size && bytes.length === after.size)
        return { mtimeMs: after.mtimeMs, size: after.size, hash: createHash('sha256').update(bytes).digest('hex') };
      await sleep(20);
    }
  } catch {
    // no file (deleted, or not written yet): nothing to compare
  }
  return undefined;
}
