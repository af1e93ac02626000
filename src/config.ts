import * as vscode from 'vscode';

/** The `agentBridge.*` settings. */
export interface BridgeConfig {
  port: number;
  requireToken: boolean;
  maxBodyBytes: number;
  pythonPath: string;
  outputTextLimit: number;
  codeModeInCells: boolean;
  /** Folders besides the workspace folders where POST /notebooks/open may open notebooks. */
  openFolders: string[];
}

let cached: BridgeConfig | undefined;

/** The settings, read once and kept until one of them changes (hot paths read them per cell). */
export function readConfig(): BridgeConfig {
  if (!cached) {
    const c = vscode.workspace.getConfiguration('agentBridge');
    cached = {
      port: c.get<number>('port', 0),
      requireToken: c.get<boolean>('requireToken', true),
      maxBodyBytes: c.get<number>('maxBodyBytes', 1024 * 1024),
      pythonPath: c.get<string>('pythonPath', '').trim() || 'python3',
      outputTextLimit: c.get<number>('outputTextLimit', 20_000),
      codeModeInCells: c.get<boolean>('codeMode.inCells', false),
      openFolders: c.get<string[]>('openFolders', []),
    };
  }
  return cached;
}

/** Drops the cached settings when an `agentBridge.*` setting changes. */
export function watchConfig(): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration('agentBridge')) cached = undefined;
  });
}
