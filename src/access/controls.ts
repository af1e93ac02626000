import * as path from 'node:path';
import { promises as fs } from 'node:fs';
import * as vscode from 'vscode';
import { ACCESS_MODES, type AccessMode, type AgentAction, type Gate } from '../core/agents/accessPolicy';
import type { CellService } from '../core/model/cellService';
import type { Log } from '../core/log';
import { readAudit, type AuditLog } from './auditLog';
import { renderSession, runSteps, sessionSteps, type ExportFormat } from './export';
import type { AgentRun, RunHistory } from '../core/runs/runHistory';
import { MARIMO_NOTEBOOK_TYPE } from '../kernels/marimoKernels';
import { writeFileAtomic } from '../fsAtomic';
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
  /** Interrupts the kernel runs agents started that go on after their request (a cell run not waited for). */
  interruptAgentRuns: () => Promise<void>;
  audit: AuditLog;
  auditDir: string;
  /** The agents' runs, for "Open Agent Runs as a Notebook". */
  history: RunHistory;
  /** Selects the builtin kernel for the runs notebook, answering once VS Code confirmed it. */
  selectBuiltinKernel: (editor: vscode.NotebookEditor) => Promise<void>;
  log: Log;
  /** The access mode in force. */
  mode: () => AccessMode;
}

/** Whether every run is of a marimo notebook: one open as such, or a marimo file (`.py`) named by path or uri. */
async function ofMarimo(cells: CellService, runs: readonly AgentRun[]): Promise<boolean> {
  const open = await cells.notebooks().catch(() => []);
  return runs.every((r) => {
    if (r.notebook === null) return false;
    const known = open.find((n) => r.notebook === n.sessionId || r.notebook === n.uri || r.notebook === n.path);
    return known ? known.notebookType === MARIMO_NOTEBOOK_TYPE : r.notebook.endsWith('.py');
  });
}

type StopDeps = Pick<ControlDeps, 'gate' | 'cells' | 'log' | 'interruptAgentRuns'>;

/**
 * Stops every agent action under way (their transports and code-mode calls hear it) and the cell
 * runs agents started, which go on in the kernel after their request; returns the actions.
 */
export async function stopAgentRuns(deps: StopDeps): Promise<AgentAction[]> {
  const stopped = deps.gate.stopAll();
  const warn = (e: unknown) => deps.log.warn(`stopping agent runs: ${String(e)}`);
  const notebooks = new Set(stopped.filter((a) => a.kind === 'run' || a.kind === 'edit').map((a) => a.notebook));
  for (const notebook of notebooks) await deps.cells.interrupt(notebook).catch(warn);
  await deps.interruptAgentRuns().catch(warn);
  return stopped;
}

/** A switch to `read-only` or `off` (the person's, or "Stop Agents") stops the agent runs under way, as "Stop Agents" does. */
export function stopOnModeChange(settings: Settings, deps: StopDeps): vscode.Disposable {
  let mode = settings.current.accessMode;
  return settings.onDidChange(() => {
    const before = mode;
    mode = settings.current.accessMode;
    if (mode !== before && (mode === 'read-only' || mode === 'off')) void stopAgentRuns(deps);
  });
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
      // Those under way now; then new ones are refused, and any that started meanwhile is stopped
      // when the mode turns off (stopOnModeChange).
      const stopped = await stopAgentRuns(deps);
      await setAccessMode('off');
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
    /** Writes the chosen runs (`ids`, else picked) as a notebook in the extension's storage, opens it, answers its path. */
    'agentBridge.openAgentRuns': async (ids?: readonly string[]) => {
      const runs = deps.history.all();
      if (!runs.length) {
        void vscode.window.showInformationMessage('No agent runs are recorded yet.');
        return undefined;
      }
      const chosen = ids
        ? runs.filter((r) => ids.includes(r.id))
        : (
            await vscode.window.showQuickPick(
              runs.map((r) => ({
                label: `${new Date(r.startedAt).toLocaleString()} ${r.label} (${r.status})${r.risk?.level ? ` · risk: ${r.risk.level}` : ''}`,
                description: `${r.client} · ${r.code.split('\n')[0]!.slice(0, 80)}`,
                run: r,
              })),
              { canPickMany: true, matchOnDescription: true, title: 'Agent Bridge: the runs to open as a notebook' },
            )
          )?.map((p) => p.run);
      if (!chosen?.length) return undefined;
      const stem = path.join(deps.auditDir, 'agent-runs', `agent-runs-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      if (await ofMarimo(deps.cells, chosen)) {
        // A marimo notebook's runs, as a marimo app (marimo's editor or `marimo run` runs it again).
        const file = `${stem}.py`;
        writeFileAtomic(file, renderSession(runSteps(chosen), 'marimo', 'agent runs'));
        await vscode.commands.executeCommand('vscode.open', vscode.Uri.file(file));
        return file;
      }
      const file = `${stem}.ipynb`;
      writeFileAtomic(file, renderSession(runSteps(chosen), 'ipynb', 'agent runs'));
      const editor = await vscode.window.showNotebookDocument(await vscode.workspace.openNotebookDocument(vscode.Uri.file(file)));
      // Ready to run again, in the builtin kernel as the notebook's own, when the command answers.
      await deps.selectBuiltinKernel(editor);
      return file;
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
