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
import { Checkpoints, type Checkpoint, type Journal } from './core/cells/checkpoints';
import { Activity, type Gate } from './core/agents/accessPolicy';
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
import { workspaceWalk } from './access/workspaceWalk';
import { WalkSchedule } from './core/runs/runFiles';
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
 *
 * The steps run in this order because their objects subscribe to VS Code's events as they are
 * made, and listeners are called in that order. Each step hands what it made to the extension's
 * subscriptions. The kernels and the cell rules call into what is made after them only once a
 * kernel runs or an agent acts: they are given getters.
 */
export function compose(deps: CompositionDeps): Composition {
  const kernels = wireKernels(deps, {
    cells: () => cells.rules,
    notebooks: () => notebooks.editor,
    kernelCalls: () => access.kernelCalls,
  });
  const notebooks = wireNotebooks(deps, kernels);
  const cells = wireCells(deps, kernels, notebooks, {
    gate: () => access.gate,
    applying: (journal) => access.applying(journal),
  });
  const access = wireAccess(deps, kernels, notebooks, cells);
  const publishing = wirePublishing(deps, notebooks);
  followSettings(deps, kernels, publishing);
  wireCommands(deps, kernels, publishing);
  return {
    refresh: publishing.refresh,
    app: (server) => serve(server, deps, { kernels, notebooks, cells, access, publishing }),
  };
}

/** What the kernels call into once they run: made after them, read when used. */
interface KernelCallees {
  cells: () => NotebookCells;
  notebooks: () => EditorNotebooks;
  kernelCalls: () => KernelCalls;
}

/** What the cell rules call into once an agent acts: made after them, read when used. */
interface CellCallees {
  gate: () => Gate;
  /** Writes the audit line of a batch about to be applied in steps. */
  applying: (journal: Journal) => Promise<void>;
}

type Kernels = ReturnType<typeof wireKernels>;
type Notebooks = ReturnType<typeof wireNotebooks>;
type Cells = ReturnType<typeof wireCells>;
type Access = ReturnType<typeof wireAccess>;
type Publishing = ReturnType<typeof wirePublishing>;

/** The kernels (builtin, marimo, Jupyter), the builtin kernel's sandbox with its status item, and the inspect program. */
function wireKernels({ context, log, settings }: CompositionDeps, later: KernelCallees) {
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
    calls: codeModeCalls(later),
    // Whom a kernel run is for: the agent action whose request queued it, if any.
    owner: () => Activity.current(),
    codeModeInCells: () => settings.current.codeModeInCells,
    wrap,
    cellId: (cell): string => later.notebooks().cellId(cell),
  });
  const jupyter = new JupyterKernels(log);
  const all = [builtin, new MarimoKernels(), jupyter];
  // The sandbox is checked once the composition is done; settings changes check it again (followSettings).
  setImmediate(() => sandbox.refresh());
  context.subscriptions.push(builtin, jupyter, sandboxStatus);
  return { builtin, all, sandbox, wrap, inspectFile, inspectProgram };
}

/**
 * Code mode: the kernel's `agent_bridge` module edits its notebook through the cell rules, as
 * the run that calls (kernelCalls.ts).
 */
function codeModeCalls(later: KernelCallees) {
  return (notebook: vscode.NotebookDocument): CallHandler => {
    // Loaded with the first call (its zod schemas are not needed before).
    const codeMode = import('./kernels/builtin/codeMode').then((m) => ({
      kind: m.codeModeKind,
      handle: m.codeModeHandler({ cells: later.cells(), docs: later.notebooks() }, notebook.uri.toString()),
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
      return later.kernelCalls().answer(call, ctx.signal, (signal) => handle(method, params, { ...ctx, signal }));
    };
  };
}

/** The open notebooks: their sessions (a kernel each), the editor's view of their cells, and one run queue per notebook. */
function wireNotebooks({ context, log, settings }: CompositionDeps, kernels: Kernels) {
  const sessions = new Sessions(kernels.all, () => settings.current.openFolders);
  const editor = new EditorNotebooks(sessions, kernels.all, log, join(storageDir(context), 'cell-versions.json'));
  // One run at a time per notebook, whoever asks (an agent over HTTP or MCP, the version read).
  const runs = new KeyedQueue();
  context.subscriptions.push(sessions, editor);
  return { sessions, editor, runs };
}

/** The cell rules, with the code check, the risk scan, the agent changes they record (checkpoints), presence and the stale marks. */
function wireCells(deps: CompositionDeps, kernels: Kernels, notebooks: Notebooks, later: CellCallees) {
  const { context, log, settings } = deps;
  const analyzer = codeAnalyzer(deps, kernels);
  const risk = riskChecks(deps, kernels, notebooks, later.gate);
  const checkpointFile = new JsonListFile<Checkpoint>(
    join(storageDir(context), 'agent-changes.json'),
    'agent changes to review',
    log,
  );
  const checkpoints: Checkpoints = new Checkpoints(() => rules, checkpointFile);
  const presence = new Presence((named) => {
    try {
      return resolveNotebook(notebooks.editor.list(), named).uri;
    } catch {
      return undefined; // a scratchpad run of a notebook that is not open: no whereabouts
    }
  });
  context.subscriptions.push(new PersonCursor(presence, notebooks.editor));
  const spansFile = process.env['AGENT_BRIDGE_EDIT_SPANS'];
  const rules = new NotebookCells(notebooks.editor, {
    outputTextLimit: () => settings.current.outputTextLimit,
    onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
    // A batch applied in steps: its checkpoint and audit line are on disk before its first step.
    onApplying: async (notebook, before, planned) => {
      const journal = checkpoints.begin(notebook, before, planned);
      if (journal) await later.applying(journal);
      return journal;
    },
    analyzer,
    presence,
    confirm: (question) => confirmWithPerson(question, settings.current.askTimeoutMs),
    risk,
    // The bench reads where each write's time goes from this file (one JSON line per write).
    spans: spansFile ? new EditSpans((span) => appendFileSync(spansFile, `${JSON.stringify(span)}\n`)) : undefined,
  });
  context.subscriptions.push(
    new StaleMarks(
      (uri) => rules.dependencies(uri),
      (cell) => notebooks.editor.cellId(cell),
      log,
      notebooks.sessions.onDidChange,
    ),
    checkpointFile,
  );
  return { rules, checkpoints, risk, presence };
}

/** Python's compiler for the cells' code checks: the notebook's builtin kernel when it runs, else a Python kept while it is used. */
function codeAnalyzer({ context, log, settings }: CompositionDeps, kernels: Kernels) {
  const analyzer = new PythonAnalyzer({
    python: () => settings.current.pythonPath,
    script: kernels.inspectFile,
    builtinKernel: async (uri) => {
      const notebook = vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri);
      const kernel = notebook && (await kernels.builtin.kernelFor(notebook));
      return kernel ?? undefined;
    },
    wrap: kernels.wrap,
    log,
  });
  context.subscriptions.push(analyzer);
  return analyzer;
}

/** The risk scan of the code agents run, in a Python process of its own (in the kernel's sandbox while that is on). */
function riskChecks({ context, log, settings }: CompositionDeps, kernels: Kernels, notebooks: Notebooks, gate: () => Gate) {
  const scanner = new PythonRiskScanner({
    python: () => settings.current.pythonPath,
    script: context.asAbsolutePath(join('dist', 'risk_scan.py')),
    roots: workspaceFolders,
    home: homedir(),
    wrap: kernels.wrap,
    log,
  });
  // The gate exists by the time an agent runs anything.
  const risk = new RiskChecks(scanner, notebooks.editor, gate);
  context.subscriptions.push(scanner);
  return risk;
}

/**
 * The person's say over agents: who calls (identities, the token), the gate every transport and
 * kernel call passes, the agents' run history, and their views.
 */
function wireAccess(deps: CompositionDeps, kernels: Kernels, notebooks: Notebooks, cells: Cells) {
  const { context, log, settings, bridge } = deps;
  // One per window, across server restarts: the credentials minted (an agent's changes stay its own) and the token's bytes.
  const identities = new ClientRegistry();
  identities.ownsChanges = (owner) => cells.checkpoints.owns(owner);
  const bearer = new BearerCheck();
  const runFile = new JsonListFile<AgentRun>(join(storageDir(context), 'agent-runs.json'), 'agent runs', log);
  const history = new RunHistory(runFile, {
    schedule: new WalkSchedule(workspaceWalk(workspaceFolders)),
    on: () => settings.current.recordRunFiles,
  });
  const access = createAgentAccess({
    identities,
    history,
    context,
    cells: cells.rules,
    notebooks: notebooks.sessions,
    connection: () => bridge.connection,
    log,
    settings,
    checkpoints: cells.checkpoints,
    presence: cells.presence,
    cellId: (cell) => notebooks.editor.cellId(cell),
    cellsOf: (notebook) => notebooks.editor.cells(notebook.uri.toString()),
    interruptAgentRuns: () => kernels.builtin.interruptRunsFor((owner) => owner instanceof Activity),
    selectBuiltinKernel: (editor) => kernels.builtin.select(editor),
  });
  context.subscriptions.push(...access.disposables, runFile);
  const kernelCalls = new KernelCalls(access.gate, () => settings.current.codeModeInCells);
  return { gate: access.gate, applying: access.applying, kernelCalls, bearer, history };
}

/**
 * What the bridge tells about the sessions (the status bar, MCP advertising, the discovery
 * files, terminals' environment), kept current, and the server's restart.
 */
function wirePublishing({ context, log, bridge, version }: CompositionDeps, notebooks: Notebooks) {
  const { sessions } = notebooks;
  const status = new BridgeStatus();
  const mcp = new McpAdvertiser(() => bridge.connection, version, log);
  const terminalEnv = context.environmentVariableCollection;
  terminalEnv.persistent = false;
  terminalEnv.description = 'Agent Bridge: MARIMO_TOKEN and AGENT_BRIDGE_URL for marimo-pair scripts and agents';
  // Kernels are resolved once per change (for Jupyter that is an API call), then shared; what
  // is published (discovery files, atomically written; terminals' environment) is written only
  // when it changed, since a notebook's runs signal the sessions may have changed many times a second.
  const marimoVersions = new MarimoVersions(notebooks.runs, () => refreshing.soon());
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
  const refresh = () => refreshing.now();
  const restartServer = async () => {
    try {
      await bridge.start();
    } finally {
      await refresh();
    }
  };
  context.subscriptions.push(
    status,
    mcp,
    refreshing,
    sessions.onDidChange(() => refreshing.soon()),
  );
  return { refresh, restartServer, marimoVersions };
}

/** A change of the settings: the server restarts when one of its own changed, and the kernel sandbox is checked again. */
function followSettings({ context, settings }: CompositionDeps, kernels: Kernels, publishing: Publishing) {
  context.subscriptions.push(
    settings.onDidChange((change) => {
      if (change.restartServer) void publishing.restartServer();
      kernels.sandbox.refresh();
    }),
  );
}

/** The extension's commands (src/commands.ts); the access controls register their own. */
function wireCommands({ context, log, settings, bridge }: CompositionDeps, kernels: Kernels, publishing: Publishing) {
  const skillDir = context.asAbsolutePath(join('skills', 'agent-bridge'));
  const { restartServer } = publishing;
  for (const [id, run] of Object.entries(
    commandTable({ bridge, builtin: kernels.builtin, log, restartServer, skillDir, settings }),
  )) {
    context.subscriptions.push(vscode.commands.registerCommand(id, run));
  }
}

/** The server's request handler over the composed services; its code loads with the first server start. */
async function serve(
  server: ServerParams,
  { log, version }: CompositionDeps,
  parts: { kernels: Kernels; notebooks: Notebooks; cells: Cells; access: Access; publishing: Publishing },
): Promise<RequestListener> {
  const [{ createApp }, { routes }, { guardRoutes }, { limitHeld }] = await Promise.all([
    import('./server/app'),
    import('./server/routes'),
    import('./server/guardRoutes'),
    import('./server/heldRequests'),
  ]);
  const { kernels, notebooks, cells, access, publishing } = parts;
  return createApp({
    routes: limitHeld(guardRoutes(routes)),
    context: {
      host: notebooks.sessions,
      cells: cells.rules,
      checkpoints: cells.checkpoints,
      runs: notebooks.runs,
      outputs: new ScratchpadOutputs(),
      version,
      marimoVersion: () => publishing.marimoVersions.current(),
      access: access.gate,
      risk: cells.risk,
      history: access.history,
      serveMcp: lazyMcp,
      inspectProgram: kernels.inspectProgram,
    },
    ...server,
    bearer: access.bearer,
    log: cappedLog(log),
  });
}

/** Where this workspace's state is kept (the window's global storage without a workspace). */
function storageDir(context: vscode.ExtensionContext): string {
  return (context.storageUri ?? context.globalStorageUri).fsPath;
}

/** The workspace folders on this machine's disk (absolute paths). */
function workspaceFolders(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
}
