import * as path from 'node:path';
import { promises as fs } from 'node:fs';
import * as vscode from 'vscode';
import { ACCESS_MODES, type AccessMode, type Gate } from '../core/accessPolicy';
import type { CellService } from '../core/cellService';
import type { Log } from '../core/log';
import { readAudit, type AuditLog } from './auditLog';
import { renderSession, sessionSteps, type ExportFormat } from './export';
import type { Settings } from '../config';
import { MODE_HELP, setAccessMode } from './modes';

const MODE_ICONS: Record<AccessMode, string> = {
  full: 'unlock',
  'ask-risky': 'warning',
  ask: 'question',
  'read-only': 'eye',
  off: 'circle-slash',
};

/** The access mode in the status bar; a click picks another. */
export class ModeStatus implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('agentBridge.access', vscode.StatusBarAlignment.Right, 99);
  private readonly watch: vscode.Disposable;

  constructor(private readonly settings: Settings) {
    this.item.name = 'Agent Bridge Access';
    this.item.command = 'agentBridge.setAccessMode';
    this.update();
    this.item.show();
    this.watch = settings.onDidChange(() => this.update());
  }

  private update(): void {
    const mode = this.settings.current.accessMode;
    this.item.text = `$(${MODE_ICONS[mode]}) Agents: ${mode}`;
    this.item.tooltip = `Agent access: ${mode} (${MODE_HELP[mode]}). Click to change.`;
  }

  dispose(): void {
    this.watch.dispose();
    this.item.dispose();
  }
}

export interface ControlDeps {
  gate: Gate;
  cells: CellService;
  audit: AuditLog;
  auditDir: string;
  log: Log;
  /** The access mode in force. */
  mode: () => AccessMode;
}

/** The person's commands over agents, in one table (ids match package.json). */
export function accessCommands(deps: ControlDeps): Record<string, (...args: never[]) => unknown> {
  return {
    'agentBridge.setAccessMode': async (mode?: AccessMode) => {
      const picked =
        mode ??
        (
          await vscode.window.showQuickPick(
            ACCESS_MODES.map((m) => ({ label: m, description: MODE_HELP[m], picked: m === deps.mode() })),
            { title: 'Agent Bridge: what may agents do?', placeHolder: `now: ${deps.mode()}` },
          )
        )?.label;
      if (picked) await setAccessMode(picked);
    },
    'agentBridge.stopAgents': async () => {
      // Refuse new actions first, then stop those under way.
      await setAccessMode('off');
      const stopped = deps.gate.stopAll();
      // Cell runs go on in the kernel after their request: interrupt the notebooks they ran in.
      const notebooks = new Set(stopped.filter((a) => a.kind === 'run' || a.kind === 'edit').map((a) => a.notebook));
      for (const notebook of notebooks) {
        await deps.cells.interrupt(notebook).catch((e: unknown) => deps.log.warn(`Stop Agents: ${String(e)}`));
      }
      // The mode as the gate now reads it, so the message cannot claim what is not so.
      void vscode.window.showInformationMessage(
        `Agent Bridge: stopped ${stopped.length} agent action(s); access is now ${deps.mode()}.`,
      );
    },
    'agentBridge.showAuditLog': async () => {
      await deps.audit.flushed();
      await vscode.window
        .showTextDocument(vscode.Uri.file(deps.audit.file), { preview: true })
        .then(undefined, () => vscode.window.showInformationMessage(`No agent action is logged yet (${deps.audit.file}).`));
      return deps.audit.file;
    },
    'agentBridge.exportSession': async (uri?: string, target?: string) => {
      const notebookUri = uri ?? vscode.window.activeNotebookEditor?.notebook.uri.toString();
      if (!notebookUri) {
        void vscode.window.showWarningMessage('Open the notebook whose agent session you want to export.');
        return undefined;
      }
      await deps.audit.flushed();
      const steps = sessionSteps(await readAudit(deps.auditDir), notebookUri);
      if (!steps.length) {
        void vscode.window.showInformationMessage('No agent actions are recorded for this notebook.');
        return undefined;
      }
      const base = vscode.Uri.parse(notebookUri);
      const file =
        target ??
        (
          await vscode.window.showSaveDialog({
            defaultUri: base.with({ path: base.path.replace(/(\.\w+)?$/, '.agent-session.py') }),
            filters: { 'Python script': ['py'], 'Jupyter notebook': ['ipynb'] },
            title: 'Export Agent Session',
          })
        )?.fsPath;
      if (!file) return undefined;
      const format: ExportFormat = file.endsWith('.ipynb') ? 'ipynb' : 'py';
      await fs.writeFile(file, renderSession(steps, format, path.basename(base.path)));
      return file;
    },
  };
}
