import { join } from 'node:path';
import * as vscode from 'vscode';
import { Bridge } from './bridge';
import { commandTable } from './commands';
import { Settings } from './config';
import { NotebookCells } from './core/notebookCells';
import { createAgentAccess } from './access';
import { Discovery, marimoRegistryDir, marimoRegistryFileName, removeStaleEntries } from './discovery';
import { BuiltinKernels } from './kernels/builtin/controller';
import type { CallHandler } from './kernels/builtin/kernelProcess';
import { ExtensionKernels, MARIMO_SOURCE } from './kernels/extensionApi';
import { JupyterKernels } from './kernels/jupyter';
import { McpAdvertiser } from './mcpAdvertiser';
import { EditorNotebooks } from './notebooks/cells';
import { Sessions } from './notebooks/sessions';
import { BridgeStatus } from './statusBar';

/** Composition root: builds the services, starts the bridge, and owns every disposable. */
export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const push = (...items: vscode.Disposable[]) => context.subscriptions.push(...items);
  const log = vscode.window.createOutputChannel('Agent Bridge', { log: true });
  const settings = new Settings();
  push(log, settings);
  try {
    const version = String(context.extension.packageJSON.version);
    const builtin = new BuiltinKernels({
      extensionId: context.extension.id,
      python: () => settings.current.pythonPath,
      script: context.asAbsolutePath(join('dist', 'kernel.py')),
      log,
      // Code mode: the kernel's `agent_bridge` module edits its notebook through the cell rules.
      // `cells` and `notebooks` exist by the time a kernel calls.
      calls: (notebook): CallHandler => {
        // Loaded with the first call (its zod schemas are not needed before).
        const handler = import('./kernels/builtin/codeMode').then((m) =>
          m.codeModeHandler({ cells, docs: notebooks }, notebook.uri.toString()),
        );
        return async (method, params, ctx) => (await handler)(method, params, ctx);
      },
      codeModeInCells: () => settings.current.codeModeInCells,
      cellId: (cell): string => notebooks.cellId(cell),
    });
    const jupyter = new JupyterKernels(log);
    const kernels = [builtin, new ExtensionKernels(MARIMO_SOURCE), jupyter];
    const sessions = new Sessions(kernels, () => settings.current.openFolders);
    const advertDir = join(context.globalStorageUri.fsPath, 'bridges');
    const ownFiles = [join(advertDir, marimoRegistryFileName('127.0.0.1', process.pid))];
    const extraFile = process.env['AGENT_BRIDGE_DISCOVERY_FILE'];
    if (extraFile) ownFiles.push(extraFile);
    const discovery = new Discovery(ownFiles, marimoRegistryDir());
    const versionFile = join((context.storageUri ?? context.globalStorageUri).fsPath, 'cell-versions.json');
    const notebooks = new EditorNotebooks(sessions, kernels, log, versionFile);
    const cells = new NotebookCells(notebooks, { outputTextLimit: () => settings.current.outputTextLimit });
    const access = createAgentAccess({
      context,
      cells,
      session: (nb) => sessions.info(nb),
      connection: () => bridge.connection,
      log,
      settings,
    });
    push(...access.disposables);
    const bridge = new Bridge({
      host: sessions,
      cells,
      version,
      log,
      discovery,
      access: access.gate,
      settings: () => settings.current,
    });
    const status = new BridgeStatus();
    const mcp = new McpAdvertiser(() => bridge.connection, version, log);
    push(mcp);
    push(
      builtin,
      jupyter,
      sessions,
      notebooks,
      status,
      { dispose: () => discovery.dispose() },
      { dispose: () => void bridge.stop() },
    );

    const terminalEnv = context.environmentVariableCollection;
    terminalEnv.persistent = false;
    terminalEnv.description = 'Agent Bridge: MARIMO_TOKEN and AGENT_BRIDGE_URL for marimo-pair scripts and agents';
    // Kernels are resolved once per change (for Jupyter that is an API call), then shared.
    const refresh = async () => {
      const connection = bridge.connection;
      const open = await sessions.sessions();
      bridge.publish(open);
      status.update(connection, open.length);
      mcp.update();
      terminalEnv.clear();
      if (!connection) return;
      terminalEnv.replace('AGENT_BRIDGE_URL', connection.url);
      if (connection.token) terminalEnv.replace('MARIMO_TOKEN', connection.token);
    };
    const restartServer = async () => {
      try {
        await bridge.start();
      } finally {
        await refresh();
      }
    };
    push(
      sessions.onDidChange(() => void refresh()),
      settings.onDidChange((change) => {
        if (change.restartServer) void restartServer();
      }),
    );
    const skillDir = context.asAbsolutePath(join('skills', 'agent-bridge'));
    for (const [id, run] of Object.entries(commandTable({ bridge, builtin, log, restartServer, skillDir, settings }))) {
      push(vscode.commands.registerCommand(id, run));
    }
    await restartServer();
    // After listening: what windows that crashed left behind is no reason to make this one wait.
    for (const file of removeStaleEntries(advertDir, marimoRegistryDir())) log.info(`removed the stale discovery file ${file}`);
  } catch (error) {
    // VS Code shows nothing when activation fails; say it where the person looks.
    const message = error instanceof Error ? error.message : String(error);
    log.error(`activation failed: ${error instanceof Error ? error.stack : message}`);
    void vscode.window.showErrorMessage(`Agent Bridge could not start: ${message}`, 'Show Log').then((c) => c && log.show());
  }
}

export function deactivate(): void {
  // Everything is in context.subscriptions, which VS Code disposes after this returns.
}
