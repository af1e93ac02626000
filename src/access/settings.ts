import * as vscode from 'vscode';
import { ACCESS_MODES, type AccessMode } from '../core/access';

/** The `agentBridge.access.*` settings, read when used (they are few and cheap to read). */
const section = () => vscode.workspace.getConfiguration('agentBridge.access');

export function accessMode(): AccessMode {
  const mode = section().get<string>('mode', 'full');
  return (ACCESS_MODES as readonly string[]).includes(mode) ? (mode as AccessMode) : 'full';
}

/** Changes the mode where the person's settings keep it (the user settings). */
export async function setAccessMode(mode: AccessMode): Promise<void> {
  await section().update('mode', mode, vscode.ConfigurationTarget.Global);
}

export const askTimeoutMs = () => Math.max(5, section().get<number>('askTimeoutSeconds', 60)) * 1000;
export const maxRunMs = () => Math.max(0, section().get<number>('maxRunSeconds', 0)) * 1000;

export const MODE_HELP: Record<AccessMode, string> = {
  full: 'agents may read, edit and run',
  ask: 'agents read freely; you answer each edit, execute and run',
  'read-only': 'agents may read sessions, cells and outputs only',
  off: 'agents get nothing but /health',
};
