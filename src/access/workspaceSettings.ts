import { parse } from 'jsonc-parser';
import * as vscode from 'vscode';
import type { Log } from '../core/log';
import { PERSONAL_SETTINGS } from '../personalSettings';

/** The governing settings a workspace settings file's text tries to set (flat keys, as VS Code writes them). */
export function attemptedIn(text: string): string[] {
  const parsed: unknown = parse(text, [], { allowTrailingComma: true });
  if (!parsed || typeof parsed !== 'object') return [];
  const set = new Set(Object.keys(parsed));
  return PERSONAL_SETTINGS.filter((key) => set.has(`agentBridge.${key}`));
}

/**
 * Says so, visibly, while a workspace settings file tries to set a governing setting: a warning
 * in the status bar for as long as it does, a notification and a log line each time the set
 * changes. VS Code drops such values before an extension can `inspect` them, so the files
 * themselves are read: each folder's `.vscode/settings.json` and the `.code-workspace` file.
 */
export class WorkspaceAttemptWarning implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('agentBridge.ignoredSettings', vscode.StatusBarAlignment.Right, 98);
  private readonly watchers: vscode.Disposable[] = [];
  private shown = '';

  constructor(private readonly log: Log) {
    this.item.name = 'Agent Bridge: ignored workspace settings';
    this.item.command = 'workbench.action.openWorkspaceSettingsFile';
    const recheck = () => void this.check();
    const watch = (pattern: vscode.GlobPattern) => {
      const watcher = vscode.workspace.createFileSystemWatcher(pattern);
      this.watchers.push(watcher, watcher.onDidCreate(recheck), watcher.onDidChange(recheck), watcher.onDidDelete(recheck));
    };
    for (const folder of vscode.workspace.workspaceFolders ?? [])
      watch(new vscode.RelativePattern(folder, '.vscode/settings.json'));
    const workspaceFile = vscode.workspace.workspaceFile;
    if (workspaceFile?.scheme === 'file') watch(workspaceFile.fsPath);
    this.watchers.push(vscode.workspace.onDidChangeConfiguration(recheck));
    recheck();
  }

  private files(): vscode.Uri[] {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => vscode.Uri.joinPath(f.uri, '.vscode', 'settings.json'));
    const workspaceFile = vscode.workspace.workspaceFile;
    return workspaceFile?.scheme === 'file' ? [...folders, workspaceFile] : folders;
  }

  private async check(): Promise<void> {
    const found = new Set<string>();
    for (const file of this.files()) {
      const bytes = await vscode.workspace.fs.readFile(file).then(
        (b) => b,
        () => undefined,
      );
      if (!bytes) continue;
      const text = new TextDecoder().decode(bytes);
      // A .code-workspace file keeps its settings under "settings".
      const own = file.path.endsWith('.code-workspace') ? JSON.stringify(parse(text)?.settings ?? {}) : text;
      for (const key of attemptedIn(own)) found.add(key);
    }
    this.update([...found].sort());
  }

  private update(keys: readonly string[]): void {
    const now = keys.join(', ');
    if (now === this.shown) return;
    this.shown = now;
    if (!keys.length) {
      this.item.hide();
      return;
    }
    const names = keys.map((k) => `agentBridge.${k}`).join(', ');
    const message =
      `Agent Bridge ignores ${names} in this workspace's settings: settings that govern agents are read ` +
      `from your user settings only, because an agent can write workspace files.`;
    this.log.warn(message);
    this.item.text = '$(warning) Workspace settings ignored';
    this.item.tooltip = message;
    this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
    this.item.show();
    void vscode.window.showWarningMessage(message);
  }

  dispose(): void {
    this.item.dispose();
    for (const w of this.watchers) w.dispose();
  }
}
