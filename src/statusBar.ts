import * as vscode from 'vscode';
import type { ConnectionInfo } from './bridge';
import type { SandboxCheck } from './kernels/builtin/kernelSandbox';

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

/** Whether the builtin kernel runs sandboxed (agentBridge.kernel.sandbox), shown only while the setting is on. */
export class KernelSandboxStatus implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('agentBridge.kernelSandbox', vscode.StatusBarAlignment.Right, 99);

  constructor() {
    this.item.name = 'Agent Bridge Kernel Sandbox';
  }

  /** `undefined`: the setting is off. */
  update(check: SandboxCheck | undefined): void {
    if (!check) return this.item.hide();
    if (check.ok) {
      this.item.text = '$(lock) Kernel sandbox';
      this.item.tooltip = `The builtin kernel runs under bubblewrap (${check.detail}): no network, no Unix sockets, its own processes only, writes only in the workspace and a private /tmp, your home folder hidden.`;
      this.item.backgroundColor = undefined;
    } else {
      this.item.text = `$(warning) Kernel sandbox: ${check.part}`;
      this.item.tooltip = `agentBridge.kernel.sandbox is on, but ${check.reason}. The builtin kernel does not start until this is fixed or the setting is off.`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
    }
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
