import * as vscode from 'vscode';
import type { Settings } from '../config';
import { Gate, type Person } from '../core/access';
import type { CellService } from '../core/cells';
import type { Log } from '../core/log';
import type { SessionInfo } from '../core/sessions';
import { ActivityView } from './activityView';
import { AuditLog } from './auditLog';
import { CellMarks } from './cellMarks';
import { accessCommands, ModeStatus } from './controls';
import { askPerson } from './prompt';
import { ActivityStore, notebookName, type NotebookResolver } from './record';
import { WorkspaceAttemptWarning } from './workspaceSettings';

export interface AccessDeps {
  context: vscode.ExtensionContext;
  cells: CellService;
  /** The session of an open notebook (session ids are how scratchpad runs name notebooks). */
  session: (notebook: vscode.NotebookDocument) => SessionInfo;
  connection: () => { url: string; token: string | null } | undefined;
  log: Log;
  settings: Settings;
}

/**
 * The VS Code side of the person's say over agents: builds the gate every transport passes
 * (mode from the settings, `ask` as a notification), and what it records into (the activity
 * view, the cell marks, the audit log in the workspace's storage), with their commands.
 */
export function createAgentAccess(deps: AccessDeps): { gate: Gate; disposables: vscode.Disposable[] } {
  const resolve: NotebookResolver = (named) => {
    const open = vscode.workspace.notebookDocuments;
    if (named === undefined) return open.length === 1 ? open[0] : undefined;
    return open.find((nb) => nb.uri.toString() === named || nb.uri.fsPath === named || deps.session(nb).id === named);
  };
  const store = new ActivityStore(resolve);
  const settings = () => deps.settings.current;
  const person: Person = {
    mode: () => settings().accessMode,
    maxRunMs: () => settings().maxRunMs,
    ask: (action, left) =>
      askPerson(action, notebookName(resolve(action.notebook), action.notebook), settings().askTimeoutMs, left),
  };
  const gate = new Gate(person, [store]);
  const auditDir = (deps.context.storageUri ?? deps.context.globalStorageUri).fsPath;
  const audit = new AuditLog(auditDir, () => deps.connection()?.token ?? null, deps.log);
  const view = new ActivityView(store, {
    server: () => deps.connection()?.url ?? 'server stopped',
    mode: () => settings().accessMode,
    clients: () => gate.clients,
  });
  const disposables: vscode.Disposable[] = [
    new WorkspaceAttemptWarning(deps.log),
    store,
    store.onDidEnd((entry) => audit.append(entry)),
    new CellMarks(store),
    view,
    new ModeStatus(deps.settings),
    deps.settings.onDidChange(() => view.schedule()),
  ];
  for (const [id, run] of Object.entries(
    accessCommands({ gate, cells: deps.cells, audit, auditDir, log: deps.log, mode: () => settings().accessMode }),
  )) {
    disposables.push(vscode.commands.registerCommand(id, run));
  }
  return { gate, disposables };
}
