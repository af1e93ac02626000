import * as vscode from 'vscode';
import type { ConnectionInfo } from './bridge';

/** Port and session count at a glance; a click copies the connection info. */
export class BridgeStatus implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('agentBridge.status', vscode.StatusBarAlignment.Right, 100);

  constructor() {
    this.item.name = 'Agent Bridge';
    this.item.command = 'agentBridge.copyConnectionInfo';
    this.item.show();
  }

  update(connection: ConnectionInfo | undefined, sessions: number): void {
    if (!connection) {
      this.item.text = '$(debug-disconnect) Bridge: stopped';
      this.item.tooltip = 'Agent Bridge is not running. Run "Agent Bridge: Restart Server".';
      return;
    }
    this.item.text = `$(plug) Bridge :${connection.port} · ${sessions}`;
    this.item.tooltip = `Agent Bridge on ${connection.url}: ${sessions} notebook session(s) agents can run code in. Click to copy connection info.`;
  }

  dispose(): void {
    this.item.dispose();
  }
}
