import * as vscode from 'vscode';
import { homedir } from 'node:os';
import type { Log } from '../../core/log';
import type { KernelCommand } from './kernelCommand';
import { checkSandbox, sandboxCommand, type SandboxCheck } from './kernelSandbox';

/**
 * The sandbox as this window shapes it (the workspace folders writable, the home folder hidden),
 * for every Python the bridge starts for the builtin kernel: the kernel, the code check and the risk scan. While
 * agentBridge.kernel.sandbox is on, each start goes through `wrap`, and what the sandbox could
 * make of it reaches `show` (the status bar): a sandbox asked for but impossible is never silent.
 */
export class WorkspaceSandbox {
  private shown: boolean | undefined;
  /** The last check: kept while it holds (a check blocks for a bubblewrap start), made again until then. */
  private checked: SandboxCheck | undefined;

  constructor(
    private readonly enabled: () => boolean,
    private readonly show: (check: SandboxCheck | undefined) => void,
    private readonly log: Log,
  ) {}

  /** `argv` as it runs now: in the sandbox (or a refusal saying why), or as it is when the setting is off. */
  wrap(argv: readonly string[], env: NodeJS.ProcessEnv, cwd?: string): KernelCommand | undefined {
    if (!this.enabled()) return undefined;
    if (!this.checked?.ok) this.checked = checkSandbox();
    const layout = {
      writable: (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath),
      home: homedir(),
      cwd,
      runtimeDir: process.env['XDG_RUNTIME_DIR'],
    };
    const { command, check } = sandboxCommand(argv, env, layout, this.checked);
    this.report(check);
    return command;
  }

  /** Checks the sandbox when the setting turned on (and says nothing more when it went off); call at start and on changes. */
  refresh(): void {
    const on = this.enabled();
    if (on === this.shown) return;
    this.shown = on;
    const check = on ? (this.checked = checkSandbox()) : undefined;
    this.report(check);
    if (check?.ok) this.log.info(`builtin kernels run sandboxed (${check.detail})`);
  }

  private report(check: SandboxCheck | undefined): void {
    this.show(check);
    if (check && !check.ok)
      this.log.warn(`agentBridge.kernel.sandbox is on, but ${check.reason}: the builtin kernel does not start`);
  }
}
