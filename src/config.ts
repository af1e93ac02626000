import * as vscode from 'vscode';
import { ACCESS_MODES, type AccessMode } from './core/agents/accessPolicy';
import { personal } from './personalSettings';

/** The `agentBridge.*` settings. */
export interface BridgeConfig {
  port: number;
  requireToken: boolean;
  maxBodyBytes: number;
  pythonPath: string;
  outputTextLimit: number;
  codeModeInCells: boolean;
  /** Run the builtin kernel under bubblewrap (`agentBridge.kernel.sandbox`). */
  kernelSandbox: boolean;
  /** Folders besides the workspace folders where POST /notebooks/open may open notebooks. */
  openFolders: string[];
  /** What agents may do (`agentBridge.access.mode`). */
  accessMode: AccessMode;
  /** How long an `ask` prompt waits for the person before refusing. */
  askTimeoutMs: number;
  /** Longest agent run before it is interrupted; 0: no limit. */
  maxRunMs: number;
  /** Record the workspace files each agent run created or changed (`agentBridge.runs.recordFiles`). */
  recordRunFiles: boolean;
}

/** The settings a running server was built with: a change to any of them restarts it. The only such list. */
export const RESTART_SETTINGS = ['port', 'requireToken', 'maxBodyBytes'] as const satisfies readonly (keyof BridgeConfig)[];

function readConfig(): BridgeConfig {
  const c = vscode.workspace.getConfiguration('agentBridge');
  // The governing settings: the person's own value only (personalSettings.ts says why).
  const own = <T>(key: string, fallback: T) => personal(c, key, fallback);
  return {
    port: own<number>('port', 0),
    requireToken: own<boolean>('requireToken', true),
    maxBodyBytes: own<number>('maxBodyBytes', 1024 * 1024),
    pythonPath: own<string>('pythonPath', '').trim() || 'python3',
    outputTextLimit: c.get<number>('outputTextLimit', 20_000),
    codeModeInCells: own<boolean>('codeMode.inCells', false),
    kernelSandbox: own<boolean>('kernel.sandbox', false),
    openFolders: own<string[]>('openFolders', []),
    accessMode: oneOf(ACCESS_MODES, own<string>('access.mode', 'full'), 'full'),
    askTimeoutMs: Math.max(5, own<number>('access.askTimeoutSeconds', 60)) * 1000,
    maxRunMs: Math.max(0, own<number>('access.maxRunSeconds', 0)) * 1000,
    recordRunFiles: own<boolean>('runs.recordFiles', true),
  };
}

/** A setting hand-edited to a value it does not take reads as its default. */
function oneOf<T extends string>(values: readonly T[], value: string, fallback: T): T {
  return (values as readonly string[]).includes(value) ? (value as T) : fallback;
}

/**
 * The settings, read once at activation and again only when an `agentBridge.*` setting changes
 * (hot paths read them per cell). The composition root makes one and passes it in.
 */
export class Settings implements vscode.Disposable {
  private value = readConfig();
  private readonly changed = new vscode.EventEmitter<{ restartServer: boolean }>();
  private readonly watcher = vscode.workspace.onDidChangeConfiguration((e) => {
    if (!e.affectsConfiguration('agentBridge')) return;
    const before = this.value;
    this.value = readConfig();
    this.changed.fire({ restartServer: RESTART_SETTINGS.some((key) => before[key] !== this.value[key]) });
  });
  /** Fires after the settings changed, saying whether the server must restart to apply them. */
  readonly onDidChange = this.changed.event;

  get current(): Readonly<BridgeConfig> {
    return this.value;
  }

  dispose(): void {
    this.watcher.dispose();
    this.changed.dispose();
  }
}
