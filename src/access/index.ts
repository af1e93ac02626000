import * as vscode from 'vscode';
import type { Settings } from '../config';
import { Gate, type Person } from '../core/agents/accessPolicy';
import type { CellService, CellSnapshot } from '../core/model/cellService';
import type { Checkpoints, Journal } from '../core/cells/checkpoints';
import type { ClientRegistry } from '../core/agents/clients';
import type { Log } from '../core/log';
import type { RunHistory } from '../core/runs/runHistory';
import { ActivityView } from './activityView';
import { AuditLog } from './auditLog';
import { CellMarks } from './cellMarks';
import { ChangeDiffs } from './changeDiff';
import { accessCommands, ModeStatus, stopOnModeChange } from './controls';
import { askPerson } from './prompt';
import { ActivityStore, notebookName, type NotebookRegistry } from './record';
import { ReviewView, SHOW_CHECKPOINT } from './review';
import { PresenceMarks } from './presenceMarks';
import type { Presence } from '../core/agents/presence';
import { WorkspaceAttemptWarning } from './workspaceSettings';

export interface AccessDeps {
  context: vscode.ExtensionContext;
  cells: CellService;
  /** The registry of open notebooks: how actions name them, and their labels. */
  notebooks: NotebookRegistry;
  connection: () => { url: string; token: string | null } | undefined;
  log: Log;
  settings: Settings;
  checkpoints: Checkpoints;
  /** The cells of an open notebook as the cell rules see them (ids, content), in order. */
  cellsOf: (notebook: vscode.NotebookDocument) => CellSnapshot[];
  /** Who the callers are: credentials the bridge minted, with the names clients gave. */
  identities: ClientRegistry;
  /** Where agents and the person are now: fed scratchpad runs here, shown in the cells and the views. */
  presence: Presence;
  cellId: (cell: vscode.NotebookCell) => string;
  /** The agents' past runs: recorded as actions end. */
  history: RunHistory;
  /** Interrupts the kernel runs agents started that go on after their request. */
  interruptAgentRuns: () => Promise<void>;
  /** Selects the builtin kernel for a notebook editor, once VS Code confirmed it. */
  selectBuiltinKernel: (editor: vscode.NotebookEditor) => Promise<void>;
}

/**
 * The VS Code side of the person's say over agents: builds the gate every transport passes
 * (mode from the settings, `ask` as a notification), and what it records into (the activity
 * view, the cell marks, the audit log in the workspace's storage), with their commands.
 */
export function createAgentAccess(deps: AccessDeps): {
  gate: Gate;
  /** Writes the audit line of a batch about to be applied in steps, before its first step. */
  applying: (journal: Journal) => Promise<void>;
  disposables: vscode.Disposable[];
} {
  const store = new ActivityStore(deps.notebooks);
  const settings = () => deps.settings.current;
  const person: Person = {
    mode: () => settings().accessMode,
    maxRunMs: () => settings().maxRunMs,
    ask: (action, left, risk) =>
      askPerson(action, notebookName(deps.notebooks, action.notebook), settings().askTimeoutMs, left, risk),
  };
  const gate = new Gate(person, [store, deps.history, deps.presence], deps.identities);
  const auditDir = (deps.context.storageUri ?? deps.context.globalStorageUri).fsPath;
  const audit = new AuditLog(auditDir, () => deps.connection()?.token ?? null, deps.log);
  /** Opens the change an action made (to one cell of it, given), from its checkpoint; false when there is none. */
  const showChange = async (action: number, cell?: vscode.NotebookCell) => {
    const checkpoint = deps.checkpoints.ofAction(action);
    const cellId = cell && deps.cellsOf(cell.notebook)[cell.index]?.id;
    if (checkpoint) await vscode.commands.executeCommand(SHOW_CHECKPOINT, checkpoint.id, cellId);
    return checkpoint !== undefined;
  };
  const present = new PresenceMarks(deps.presence, { cellId: deps.cellId, label: (n) => deps.notebooks.label(n) });
  const view = new ActivityView(
    store,
    {
      server: () => deps.connection()?.url ?? 'server stopped',
      mode: () => settings().accessMode,
      clients: () => gate.clients,
    },
    (action) => showChange(action),
    present,
  );
  const diffs = new ChangeDiffs(deps.checkpoints, deps.cellsOf);
  const disposables: vscode.Disposable[] = [
    new WorkspaceAttemptWarning(deps.log),
    store,
    store.onDidEnd((entry) => audit.append(entry)),
    audit,
    new CellMarks(store, showChange),
    present,
    view,
    diffs,
    new ReviewView(deps.checkpoints, diffs),
    new ModeStatus(deps.settings),
    stopOnModeChange(deps.settings, { gate, cells: deps.cells, log: deps.log, interruptAgentRuns: deps.interruptAgentRuns }),
    deps.settings.onDidChange(() => view.schedule()),
  ];
  for (const [id, run] of Object.entries(
    accessCommands({
      gate,
      cells: deps.cells,
      interruptAgentRuns: deps.interruptAgentRuns,
      audit,
      auditDir,
      history: deps.history,
      selectBuiltinKernel: deps.selectBuiltinKernel,
      log: deps.log,
      mode: () => settings().accessMode,
    }),
  )) {
    disposables.push(vscode.commands.registerCommand(id, run));
  }
  const applying = async ({ action, checkpoint }: Journal) => {
    const entry = action === undefined ? undefined : store.get(action);
    if (entry)
      await audit.applying(
        entry,
        `applying ${checkpoint.summary} in steps (agent change ${checkpoint.id}); a line with its end follows unless the editor stopped first`,
      );
  };
  return { gate, applying, disposables };
}
