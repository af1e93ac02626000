import * as vscode from 'vscode';

/** The `agentBridge.*` settings, read once per server start. */
export interface BridgeConfig {
  port: number;
  requireToken: boolean;
  maxBodyBytes: number;
  pythonPath: string;
  outputTextLimit: number;
}

export function readConfig(): BridgeConfig {
  const c = vscode.workspace.getConfiguration('agentBridge');
  return {
    port: c.get<number>('port', 0),
    requireToken: c.get<boolean>('requireToken', true),
    maxBodyBytes: c.get<number>('maxBodyBytes', 1024 * 1024),
    pythonPath: c.get<string>('pythonPath', '').trim() || 'python3',
    outputTextLimit: c.get<number>('outputTextLimit', 20_000),
  };
}
