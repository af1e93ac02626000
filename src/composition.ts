import { appendFileSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { RequestListener } from 'node:http';
import * as vscode from 'vscode';
import type { Bridge, ServerParams } from './bridge';
import { commandTable } from './commands';
import type { Settings } from './config';
import { NotebookCells } from './core/cells/notebookCells';
import { KeyedQueue } from './core/flow/keyedQueue';
import { CoalescedTask } from './core/flow/coalescedTask';
import { errorMessage } from './core/errorMessage';
import { ScratchpadOutputs } from './core/outputs/scratchpadOutputs';
import { cappedLog } from './core/log';
import { EditSpans } from './core/flow/editSpans';
import { ClientRegistry } from './core/agents/clients';
import { BearerCheck } from './server/bearerCheck';
import { createAgentAccess } from './access/index';
import { JsonListFile } from './access/jsonListFile';
import { confirmWithPerson } from './access/prompt';
import { Checkpoints, type Checkpoint } from './core/cells/checkpoints';
import { Activity } from './core/agents/accessPolicy';
import { KernelCalls } from './core/runs/kernelCalls';
import { BuiltinKernels } from './kernels/builtin/controller';
import type { CallHandler } from './kernels/builtin/kernelProcess';
import { MARIMO_SOURCE, MarimoKernels } from './kernels/marimoKernels';
import { MarimoVersions } from './core/runs/marimoVersion';
import { JupyterKernels } from './kernels/jupyter';
import { PythonAnalyzer } from './kernels/pythonAnalyzer';
import { PythonRiskScanner } from './kernels/riskScanner';
import { RiskChecks } from './core/cells/riskChecks';
import { RunHistory, type AgentRun } from './core/runs/runHistory';
import { lazyMcp } from './mcp/lazy';
import { McpAdvertiser } from './mcpAdvertiser';
import { EditorNotebooks } from './notebooks/editorNotebooks';
import { Sessions } from './notebooks/notebookRegistry';
import { StaleMarks } from './notebooks/staleMarks';
import { PersonCursor } from './notebooks/personCursor';
import { Presence } from './core/agents/presence';
import { resolveNotebook } from './core/cells/refs';
import { WorkspaceSandbox } from './kernels/builtin/workspaceSandbox';
import { BridgeStatus, KernelSandboxStatus } from './statusBar';

/** How long a burst of session changes is gathered before the sessions are published again. */
const REFRESH_GATHER_MS = 20;

export interface CompositionDeps {
  context: vscode.ExtensionContext;
  log: vscode.LogOutputChannel;
  settings: Settings;
  bridge: Bridge;
  version: string;
}

export interface Composition {
  /** The server's request handler: Express, the route table and the access guard over these services. */
  app(server: ServerParams): Promise<RequestListener>;
  /** Re-reads the sessions and tells everyone who shows or advertises them (status bar, terminals, discovery files, MCP). */
  refresh(): Promise<void>;
}

/**
 * Everything of the extension but the socket: kernels, notebooks, cells, the person's access
 * controls, the status bar, MCP advertising and the commands. A bundle of its own
 * (dist/composition.js), which src/extension.ts loads once the server listens, so activation
 * does not wait for its code to load.
 */
export function compose({ context, log, settings, bridge, version }: CompositionDeps): Composition {
  const push = (...items: vscode.Disposable[]) => context.subscriptions.push(...items);
  const inspectFile = context.asAbsolutePath(join('dist', 'kernel_inspect.py'));
  let inspectSource: string | undefined;
  const inspectProgram = () => (inspectSource ??= readFileSync(inspectFile, 'utf8'));
  const sandboxStatus = new KernelSandboxStatus();
  const sandbox = new WorkspaceSandbox(
    () => settings.current.kernelSandbox,
    (check) => sandboxStatus.update(check),
    log,
  );
  const wrap = sandbox.wrap.bind(sandbox);
  const builtin = new BuiltinKernels({
    extensionId: context.extension.id,
    python: () => settings.current.pythonPath,
    script: context.asAbsolutePath(join('dist', 'kernel.py')),
    log,
    // Code mode: the kernel's `agent_bridge` module edits its notebook through the cell rules, as
    // the run that calls (kernelCalls.ts). `cells`, `notebooks` and `kernelCalls` exist by the time a kernel calls.
    calls: (notebook): CallHandler => {
      // Loaded with the first call (its zod schemas are not needed before).
      const codeMode = import('./kernels/builtin/codeMode').then((m) => ({
        kind: m.codeModeKind,
        handle: m.codeModeHandler({ cells, docs: notebooks }, notebook.uri.toString()),
      }));
      return async (method, params, ctx) => {
        const { kind, handle } = await codeMode;
        const call = {
          method,
          ...kind(method, params),
          notebook: notebook.uri.toString(),
          code: JSON.stringify(params) ?? '',
          run: ctx.run,
        };
        return kernelCalls.answer(call, ctx.signal, (signal) => handle(method, params, { ...ctx, signal }));
      };
    },
    // Whom a kernel run is for: the agent action whose request queued it, if any.
    owner: () => Activity.current(),
    codeModeInCells: () => settings.current.codeModeInCells,
    wrap,
    cellId: (cell): string => notebooks.cellId(cell),
  });
  const jupyter = new JupyterKernels(log);
  const kernels = [builtin, new MarimoKernels(), jupyter];
  const sessions = new Sessions(kernels, () => settings.current.openFolders);
  const storage = (context.storageUri ?? context.globalStorageUri).fsPath;
  const spansFile = process.env['AGENT_BRIDGE_EDIT_SPANS'];
  const notebooks = new EditorNotebooks(sessions, kernels, log, join(storage, 'cell-versions.json'));
  const analyzer = new PythonAnalyzer({
    python: () => settings.current.pythonPath,
    script: inspectFile,
    builtinKernel: async (uri) => {
      const notebook = vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri);
      const kernel = notebook && (await builtin.kernelFor(notebook));
      return kernel ?? undefined;
    },
    wrap,
    log,
  });
  const scanner = new PythonRiskScanner({
    python: () => settings.current.pythonPath,
    script: context.asAbsolutePath(join('dist', 'risk_scan.py')),
    roots: () => (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath),
    home: homedir(),
    log,
  });
  // The gate exists by the time an agent runs anything.
  const risk = new RiskChecks(scanner, notebooks, () => access.gate);
  push(scanner);
  const checkpointFile = new JsonListFile<Checkpoint>(join(storage, 'agent-changes.json'), 'agent changes to review', log);
  const checkpoints: Checkpoints = new Checkpoints(() => cells, checkpointFile);
  const presence = new Presence((named) => {
    try {
      return resolveNotebook(notebooks.list(), named).uri;
    } catch {
      return undefined; // a scratchpad run of a notebook that is not open: no whereabouts
    }
  });
  push(new PersonCursor(presence, notebooks));
  const cells = new NotebookCells(notebooks, {
    outputTextLimit: () => settings.current.outputTextLimit,
    onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
    // A batch applied in steps: its checkpoint and audit line are on disk before its first step.
    onApplying: async (notebook, before, planned) => {
      const journal = checkpoints.begin(notebook, before, planned);
      if (journal) await access.applying(journal);
      return journal;
    },
    analyzer,
    presence,
    confirm: (question) => confirmWithPerson(question, settings.current.askTimeoutMs),
    risk,
    // The bench reads where each write's time goes from this file (one JSON line per write).
    spans: spansFile ? new EditSpans((span) => appendFileSync(spansFile, `${JSON.stringify(span)}\n`)) : undefined,
  });
  push(
    new StaleMarks(
      (uri) => cells.dependencies(uri),
      (cell) => notebooks.cellId(cell),
      log,
      sessions.onDidChange,
    ),
  );
  // One per window, across server restarts: the credentials minted (an agent's changes stay its own) and the token's bytes.
  const identities = new ClientRegistry();
  identities.ownsChanges = (owner) => checkpoints.owns(owner);
  const bearer = new BearerCheck();
  const runFile = new JsonListFile<AgentRun>(join(storage, 'agent-runs.json'), 'agent runs', log);
  const history = new RunHistory(runFile);
  const access = createAgentAccess({
    identities,
    history,
    context,
    cells,
    notebooks: sessions,
    connection: () => bridge.connection,
    log,
    settings,
    checkpoints,
    presence,
    cellId: (cell) => notebooks.cellId(cell),
    cellsOf: (notebook) => notebooks.cells(notebook.uri.toString()),
    interruptAgentRuns: () => builtin.interruptRunsFor((owner) => owner instanceof Activity),
  });
  push(...access.disposables, checkpointFile, runFile);
  const kernelCalls = new KernelCalls(access.gate, () => settings.current.codeModeInCells);
  const status = new BridgeStatus();
  setImmediate(() => sandbox.refresh());
  const mcp = new McpAdvertiser(() => bridge.connection, version, log);
  push(mcp, builtin, jupyter, sessions, notebooks, status, sandboxStatus);

  const terminalEnv = context.environmentVariableCollection;
  terminalEnv.persistent = false;
  terminalEnv.description = 'Agent Bridge: MARIMO_TOKEN and AGENT_BRIDGE_URL for marimo-pair scripts and agents';
  // Kernels are resolved once per change (for Jupyter that is an API call), then shared; what
  // is published (discovery files, atomically written; terminals' environment) is written only
  // when it changed, since a notebook's runs signal the sessions may have changed many times a second.
  // One run at a time per notebook, whoever asks (an agent over HTTP or MCP, the version read).
  const runs = new KeyedQueue();
  const marimoVersions = new MarimoVersions(runs, () => refreshing.soon());
  let told = '';
  const republish = async () => {
    const connection = bridge.connection;
    const open = await sessions.sessions();
    marimoVersions.learn(
      open.filter((s) => s.notebookType === MARIMO_SOURCE.notebookType),
      async (id) => {
        const kernel = await sessions.kernelFor(id);
        return kernel.kind === MARIMO_SOURCE.name ? kernel : undefined;
      },
    );
    const now = JSON.stringify([connection?.url, connection?.token, open, marimoVersions.current()]);
    if (now === told) return;
    told = now;
    bridge.publish(open, marimoVersions.current());
    status.update(connection, open.length);
    mcp.update();
    terminalEnv.clear();
    if (!connection) return;
    terminalEnv.replace('AGENT_BRIDGE_URL', connection.url);
    if (connection.token) terminalEnv.replace('MARIMO_TOKEN', connection.token);
  };
  const refreshing = new CoalescedTask(republish, REFRESH_GATHER_MS, (error) =>
    log.warn(`refreshing the sessions failed: ${errorMessage(error)}`),
  );
  push(refreshing);
  const refresh = () => refreshing.now();
  const restartServer = async () => {
    try {
      await bridge.start();
    } finally {
      await refresh();
    }
  };
  push(
    sessions.onDidChange(() => refreshing.soon()),
    settings.onDidChange((change) => {
      if (change.restartServer) void restartServer();
      sandbox.refresh();
    }),
  );
  const skillDir = context.asAbsolutePath(join('skills', 'agent-bridge'));
  for (const [id, run] of Object.entries(commandTable({ bridge, builtin, log, restartServer, skillDir, settings }))) {
    push(vscode.commands.registerCommand(id, run));
  }

  return {
    refresh,
    app: async (server) => {
      const [{ createApp }, { routes }, { guardRoutes }, { limitHeld }] = await Promise.all([
        import('./server/app'),
        import('./server/routes'),
        import('./server/guardRoutes'),
        import('./server/heldRequests'),
      ]);
      return createApp({
        routes: limitHeld(guardRoutes(routes)),
        context: {
          host: sessions,
          cells,
          checkpoints,
          runs,
          outputs: new ScratchpadOutputs(),
          version,
          marimoVersion: () => marimoVersions.current(),
          access: access.gate,
          risk,
          history,
          serveMcp: lazyMcp,
          inspectProgram,
        },
        ...server,
        bearer,
        log: cappedLog(log),
      });
    },
  };
}
