import * as vscode from 'vscode';
import type { AccessMode } from '../core/agents/accessPolicy';

/** Changes the mode where the person's settings keep it (the user settings); config.ts reads it back. */
export async function setAccessMode(mode: AccessMode): Promise<void> {
  await vscode.workspace.getConfiguration('agentBridge.access').update('mode', mode, vscode.ConfigurationTarget.Global);
}

export const MODE_HELP: Record<AccessMode, string> = {
  full: 'agents may read, edit and run',
  'ask-risky': 'as full, but you answer each run the risk scan flags critical or high',
  ask: 'agents read freely; you answer each edit, save, execute and run',
  'read-only': 'agents may read sessions, cells and outputs only',
  off: 'agents get nothing but /health',
};
