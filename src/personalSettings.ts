import * as vscode from 'vscode';

/**
 * The settings that govern agents. An agent can write files, so a workspace or folder
 * `.vscode/settings.json` must not be able to loosen any of them: package.json declares them
 * application- or machine-scoped (and restricted in untrusted workspaces), and the bridge reads
 * only the person's own value (user settings, else the default) whatever VS Code would merge.
 */
export const PERSONAL_SETTINGS = [
  'port',
  'requireToken',
  'maxBodyBytes',
  'pythonPath',
  'codeMode.inCells',
  'kernel.sandbox',
  'openFolders',
  'access.mode',
  'access.askTimeoutSeconds',
  'access.maxRunSeconds',
  'runs.recordFiles',
] as const;

/** The person's own value of an `agentBridge.*` setting: user settings, else the declared default. */
export function personal<T>(c: vscode.WorkspaceConfiguration, key: string, fallback: T): T {
  const seen = c.inspect<T>(key);
  return seen?.globalValue ?? seen?.defaultValue ?? fallback;
}
