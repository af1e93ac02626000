/**
 * The sandbox launcher: a real VS Code (code-server from npm, run under Node 24) in its own temp
 * root, with headless Chromium holding the workbench open so the extension host runs and VS Code
 * API calls are served. Used by the harness (sandbox-test/run.ts), sandbox-up/down/cleanup and the
 * integration tests (scripts/code-launcher.sh runs this file's CLI).
 *
 * Isolation: every run gets `.vscode-test/runs/<id>/` with its own HOME, XDG_* dirs,
 * user-data-dir, extensions-dir and code-server config, and its own TMPDIR `/tmp/ab-XXXXXX` (short:
 * the Unix sockets made there must fit in 108 bytes, whatever the checkout's depth). Every process we start carries
 * `AGENT_BRIDGE_SANDBOX=<id>` in its environment, and the run is recorded in
 * `.vscode-test/sandboxes/<id>.json` (pids and process groups) so cleanup can find exactly those
 * processes and nothing else.
 *
 * SETUP.md §5 says how the stack is installed and run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { formatWithOptions, parseArgs } from 'node:util';
import type { BrowserContext, Page } from 'playwright-core';
import {
  addProcess,
  keepLogs,
  listProcs,
  readRecord,
  recordPath,
  removeShortTmp,
  removeTree,
  sandboxProcesses,
  SHORT_TMP_PREFIX,
  signal,
  writeRecord,
  type SandboxRecord,
} from './records';
import { describeExtensions, findExtension, givenExtensions, JUPYTER_ID } from './extensions';
import { MARKER_VAR, STACK } from './stack';
import { errorMessage } from '../src/core/errorMessage';
import { timedId } from '../src/core/ids';
import { sleep } from '../src/core/sleep';
import { progressLog } from './progress';

export * from './stack';
export * from './records';

// -------------------------------------------------------------------------------------- types

/** The folders of one sandbox, all under `root` but `tmp` (see SHORT_TMP_PREFIX). */
export interface SandboxDirs {
  root: string;
  home: string;
  configHome: string;
  dataHome: string;
  stateHome: string;
  tmp: string;
  userData: string;
  extensions: string;
  chrome: string;
  logs: string;
}

export interface SandboxOptions {
  /** Folder opened in the workbench. */
  workspace: string;
  /** Install this .vsix before starting. */
  vsix?: string;
  /** Other extensions' .vsix files installed beside it (given by path: ./extensions.ts). */
  otherVsix?: readonly string[];
  /**
   * Offer the setup venv's ipykernel to the Jupyter extension as the `python3` kernelspec
   * ("Python 3 (ipykernel)") in the sandbox's own Jupyter data folder, where it looks first.
   */
  venvKernelspec?: boolean;
  /** Load this folder as the extension under development (smoke-test-driver payload). */
  extensionDevelopmentPath?: string;
  /** Run this file's `run()` inside the extension host; see `Sandbox.testsExitCode`. */
  extensionTestsPath?: string;
  /** Extra environment for code-server (and so the extension host); may depend on the dirs. */
  env?: Record<string, string> | ((dirs: SandboxDirs) => Record<string, string>);
  /** Extra user settings, merged over the defaults. */
  settings?: Record<string, unknown>;
  /** Sandbox id (default: `<kind>-<time>-<random>`). */
  id?: string;
  /** Free-form label stored in the record: `harness`, `up`, `tests`, ... */
  kind?: string;
  /** Timeout of each startup wait, ms (default 60 000). */
  startupTimeoutMs?: number;
  /** Extension host console lines (only delivered in smoke-test-driver mode). */
  onLog?: (type: string, text: string) => void;
  /** Progress messages (default: stderr with a timestamp). */
  onProgress?: (message: string) => void;
  /** Stop this sandbox on SIGINT/SIGTERM and kill its processes on exit (default true). */
  handleSignals?: boolean;
}

export interface Sandbox {
  readonly id: string;
  readonly root: string;
  readonly dirs: SandboxDirs;
  /** The isolated environment code-server runs with (HOME, XDG_*, TMPDIR, PATH with Node 24, opts.env). */
  readonly env: Record<string, string>;
  readonly codeServerPort: number;
  readonly codeServerPid: number;
  readonly workspace: string;
  /** Workbench URL the browser opened. */
  readonly workbenchUrl: string;
  /** The Playwright page holding the workbench (to act as the person: click, type). */
  readonly page: Page;
  /** Exit code reported by `codeAutomationExit` when extensionTestsPath was given. */
  readonly testsExitCode: Promise<number> | undefined;
  /** Last lines of code-server's log, for error messages. */
  logTail(lines?: number): string;
  /** True while code-server runs and the workbench page is open. */
  alive(): boolean;
  /** Polls `probe` until it returns a truthy value; fails early if code-server dies; errors carry the log tail. */
  waitFor<T>(
    what: string,
    probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
    timeoutMs?: number,
  ): Promise<T>;
  /** Stops every process of the sandbox and keeps its files (to inspect what it left behind); `stop()` removes them. */
  halt(): Promise<void>;
  /** Stops every process (if not halted yet), then removes the sandbox's files. */
  stop(): Promise<void>;
}

export class SandboxError extends Error {
  constructor(
    message: string,
    readonly logTail = '',
  ) {
    super(logTail ? `${message}\n--- code-server log (tail) ---\n${logTail}` : message);
    this.name = 'SandboxError';
  }
}

// ------------------------------------------------------------------------------------ helpers

const defaultProgress = progressLog('sandbox');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function httpStatus(url: string, timeoutMs = 2000): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

function tailOfFile(file: string, lines: number): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text
      .split('\n')
      .slice(-lines - 1)
      .join('\n')
      .trimEnd();
  } catch {
    return '(no log)';
  }
}

/** Runs `fn` with process.env.TMPDIR pointed at `tmp` (Playwright puts its artifacts in os.tmpdir()). */
async function withTmpdir<T>(tmp: string, fn: () => Promise<T>): Promise<T> {
  const saved = process.env['TMPDIR'];
  process.env['TMPDIR'] = tmp;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = saved;
  }
}

async function withTimeout<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

// ----------------------------------------------------------------------------------- launch

const DEFAULT_SETTINGS: Record<string, unknown> = {
  'security.workspace.trust.enabled': false,
  'chat.disableAIFeatures': true,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoUpdate': false,
  'extensions.autoCheckUpdates': false,
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  // With AI features off the secondary side bar is empty; open, it takes a quarter of a 1280-pixel
  // window from every screenshot.
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'update.mode': 'none',
  // code-server's extension host otherwise looks for ports to forward by forking `ps` and
  // `ls /proc/*/fd` every 2 s or more: a steady load on a small machine (desktop VS Code never
  // does it), which every timing the harness and the benchmark take would share. Turning
  // auto-forwarding off is not enough while code-server has a tunnel provider; "output" is.
  'remote.autoForwardPorts': false,
  'remote.autoForwardPortsSource': 'output',
  // A language server's inlay hints (marimo's adds types: `x: LiteralString = ...`) are drawn in
  // the code's lines, so the text the checks read from the page would not be the cell's.
  'editor.inlayHints.enabled': 'off',
};

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Environment variables of the caller that must not leak into the sandbox. */
function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (/^(VSCODE_|ELECTRON_)/.test(key) || key === 'NODE_OPTIONS' || key === 'MARIMO_TOKEN') continue;
    env[key] = value;
  }
  return env;
}

function makeDirs(root: string): SandboxDirs {
  const dirs: SandboxDirs = {
    root,
    home: path.join(root, 'home'),
    configHome: path.join(root, 'home', '.config'),
    dataHome: path.join(root, 'home', '.local', 'share'),
    stateHome: path.join(root, 'home', '.local', 'state'),
    tmp: fs.mkdtempSync(SHORT_TMP_PREFIX),
    userData: path.join(root, 'user-data'),
    extensions: path.join(root, 'extensions'),
    chrome: path.join(root, 'chrome'),
    logs: path.join(root, 'logs'),
  };
  for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true, mode: 0o700 }); // mkdtemp's is 0700 too
  return dirs;
}

function writeVenvKernelspec(dirs: SandboxDirs): void {
  if (!fs.existsSync(STACK.venvPython))
    throw new SandboxError(`no venv at ${path.dirname(STACK.venvBin)}; run \`npm run setup\` first`);
  const dir = path.join(dirs.dataHome, 'jupyter', 'kernels', 'python3');
  fs.mkdirSync(dir, { recursive: true });
  const spec = {
    argv: [STACK.venvPython, '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
    display_name: 'Python 3 (ipykernel)',
    language: 'python',
    metadata: { debugger: true },
  };
  fs.writeFileSync(path.join(dir, 'kernel.json'), JSON.stringify(spec, null, 1));
}

const liveSandboxes = new Set<{ stop: () => Promise<void>; killNow: () => void }>();
let signalsInstalled = false;
function installSignalHandlers(): void {
  if (signalsInstalled) return;
  signalsInstalled = true;
  let signalled = false;
  const onSignal = (sig: NodeJS.Signals) => {
    const code = sig === 'SIGINT' ? 130 : 143;
    const all = [...liveSandboxes];
    if (all.length === 0 || signalled) process.exit(code); // a second signal: kill (exit handler) and go
    signalled = true;
    process.stderr.write(`[sandbox] ${sig}: stopping ${all.length} sandbox(es); send it again to kill them at once\n`);
    void withTimeout('stopping sandboxes', 30_000, Promise.allSettled(all.map((s) => s.stop()))).finally(() =>
      process.exit(code),
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', () => {
    for (const s of liveSandboxes) s.killNow();
  });
}

/** Throws a SandboxError naming what is missing: the stack (`npm run setup`), the workspace, a .vsix. */
function checkLaunchInputs(opts: SandboxOptions, workspace: string): void {
  for (const [what, file] of [
    ['code-server', STACK.codeServer],
    ['Node 24', path.join(STACK.node24Bin, 'node')],
    ['Chromium', STACK.chromium],
  ] as const) {
    if (!fs.existsSync(file))
      throw new SandboxError(`${what} not found at ${file}; run \`npm run setup\` (scripts/setup-vscode.sh) first`);
  }
  if (!fs.statSync(workspace, { throwIfNoEntry: false })?.isDirectory())
    throw new SandboxError(`workspace is not a folder: ${workspace}`);
  for (const vsix of [opts.vsix, ...(opts.otherVsix ?? [])])
    if (vsix && !fs.existsSync(vsix)) throw new SandboxError(`vsix not found: ${vsix}`);
}

/** The isolated environment code-server runs with: its own HOME, XDG_* and TMPDIR, Node 24 first on PATH. */
function sandboxEnv(id: string, dirs: SandboxDirs, opts: SandboxOptions): Record<string, string> {
  const extraEnv = typeof opts.env === 'function' ? opts.env(dirs) : (opts.env ?? {});
  return {
    ...inheritedEnv(),
    HOME: dirs.home,
    XDG_CONFIG_HOME: dirs.configHome,
    XDG_DATA_HOME: dirs.dataHome,
    XDG_STATE_HOME: dirs.stateHome,
    XDG_CACHE_HOME: path.join(dirs.home, '.cache'),
    TMPDIR: dirs.tmp,
    PATH: `${STACK.node24Bin}${path.delimiter}${process.env['PATH'] ?? ''}`,
    [MARKER_VAR]: id,
    ...extraEnv,
  };
}

/** Writes the user settings and code-server's config; returns the arguments every code-server call takes. */
function writeCodeServerConfig(root: string, dirs: SandboxDirs, settings: Record<string, unknown> | undefined): string[] {
  fs.mkdirSync(path.join(dirs.userData, 'User'), { recursive: true });
  fs.writeFileSync(
    path.join(dirs.userData, 'User', 'settings.json'),
    JSON.stringify({ ...DEFAULT_SETTINGS, ...settings }, null, 2),
  );
  const configFile = path.join(root, 'config.yaml');
  fs.writeFileSync(configFile, 'auth: none\ncert: false\n');
  return ['--config', configFile, '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions];
}

/** The sandbox's record, written before any process starts: cleanup finds the processes by it. */
function startRecord(id: string, kind: string, root: string, dirs: SandboxDirs, workspace: string): SandboxRecord {
  const record: SandboxRecord = {
    id,
    kind,
    status: 'starting',
    root,
    tmp: dirs.tmp,
    workspace,
    launcherPid: process.pid,
    pgids: [],
    pids: [],
    starts: {},
    createdAt: new Date().toISOString(),
  };
  if (process.env[MARKER_VAR] === id && process.env['AGENT_BRIDGE_SANDBOX_LOG'])
    record.logFile = process.env['AGENT_BRIDGE_SANDBOX_LOG'];
  addProcess(record, process.pid, false);
  writeRecord(record);
  return record;
}

/** What a launch has made so far; each step adds to it, and `fail`/`stop` undo all of it. */
interface LaunchFiles {
  id: string;
  root: string;
  dirs: SandboxDirs;
  env: Record<string, string>;
  /** Arguments of every code-server call (config, user data, extensions). */
  common: string[];
  record: SandboxRecord;
  serverLog: string;
}

/**
 * One sandbox's processes (code-server, Chromium and the workbench page) from launch to stop:
 * the launch steps start them in order, `halt`/`stop` end them (and remove the files).
 */
class SandboxProcesses {
  server: ChildProcess | undefined;
  serverExit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  context: BrowserContext | undefined;
  page: Page | undefined;
  pageGone = false;
  port = 0;
  testsExitCode: Promise<number> | undefined;
  workbenchUrl = '';
  private stopping: Promise<void> | undefined;
  private removing: Promise<void> | undefined;

  constructor(
    readonly files: LaunchFiles,
    private readonly progress: (message: string) => void,
    private readonly startupMs: number,
  ) {}

  readonly logTail = (lines = 40): string => tailOfFile(this.files.serverLog, lines);

  readonly killNow = (): void => {
    for (const pgid of this.files.record.pgids) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  };

  readonly waitFor = async <T>(
    what: string,
    probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
    timeoutMs = this.startupMs,
  ): Promise<T> => {
    const end = Date.now() + timeoutMs;
    let lastError = '';
    for (;;) {
      if (this.serverExit)
        throw new SandboxError(
          `code-server exited (code ${this.serverExit.code}, signal ${this.serverExit.signal}) while waiting for ${what}`,
          this.logTail(),
        );
      if (this.pageGone)
        throw new SandboxError(
          `the workbench page closed or crashed while waiting for ${what} (see ${path.join(this.files.dirs.logs, 'browser.log')})`,
          this.logTail(),
        );
      try {
        const value = await probe();
        if (value) return value;
      } catch (err) {
        lastError = errorMessage(err);
      }
      if (Date.now() > end)
        throw new SandboxError(
          `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${lastError})` : ''}`,
          this.logTail(),
        );
      await sleep(150);
    }
  };

  readonly alive = (): boolean => !this.serverExit && !this.pageGone && !this.stopping;
  readonly halt = (): Promise<void> => (this.stopping ??= this.shutdown());
  readonly stop = (): Promise<void> => (this.removing ??= this.remove());

  /** Marks the record failed, stops everything and throws a SandboxError with the log tail. */
  async fail(err: unknown): Promise<never> {
    const { record } = this.files;
    record.status = 'failed';
    record.error = errorMessage(err);
    writeRecord(record);
    await this.stop().catch(() => undefined);
    throw err instanceof SandboxError ? err : new SandboxError(record.error, this.logTail());
  }

  installExtensions(vsixes: readonly string[]): void {
    for (const vsix of vsixes) {
      const t0 = Date.now();
      const inst = spawnSync(STACK.codeServer, [...this.files.common, '--install-extension', path.resolve(vsix), '--force'], {
        env: this.files.env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      if (inst.status !== 0)
        throw new SandboxError(
          `installing ${vsix} failed (status ${inst.status}): ${(inst.stdout + inst.stderr).trim().slice(-2000)}`,
        );
      this.progress(`installed ${path.basename(vsix)} (${Date.now() - t0} ms)`);
    }
  }

  /** Starts code-server on a free port (again on another, up to three times, if that one was taken) and waits for /healthz. */
  async startCodeServer(workspace: string, devMode: boolean): Promise<void> {
    const { common, env, record, serverLog } = this.files;
    for (let attempt = 1; ; attempt++) {
      this.port = await freePort();
      const out = fs.openSync(serverLog, 'a');
      this.serverExit = undefined;
      const child = spawn(
        STACK.codeServer,
        [
          ...common,
          '--auth',
          'none',
          '--bind-addr',
          `127.0.0.1:${this.port}`,
          '--disable-telemetry',
          '--disable-update-check',
          '--disable-workspace-trust',
          '--disable-getting-started-override',
          '--reconnection-grace-time',
          '5',
          '--ignore-last-opened',
          ...(devMode ? ['--vscode-option', 'enable-smoke-test-driver'] : []),
          workspace,
        ],
        { env, detached: true, stdio: ['ignore', out, out] },
      );
      this.server = child;
      fs.closeSync(out);
      child.on('exit', (code, sig) => {
        if (child === this.server) this.serverExit = { code, signal: sig };
      });
      record.codeServerPid = child.pid!;
      record.codeServerPort = this.port;
      addProcess(record, child.pid!, true);
      writeRecord(record);
      try {
        await this.waitFor(
          'code-server /healthz',
          async () => (await httpStatus(`http://127.0.0.1:${this.port}/healthz`)) === 200,
        );
        break;
      } catch (err) {
        const addrInUse = /EADDRINUSE/.test(this.logTail(10));
        if (!addrInUse || attempt >= 3) throw err;
        this.progress(`port ${this.port} was taken, retrying`);
        signal(-child.pid!, 'SIGKILL');
      }
    }
    this.progress(`code-server ${this.server.pid} up on 127.0.0.1:${this.port}`);
  }

  /** Opens the workbench in headless Chromium: the extension host starts only when a workbench connects, and needs it to stay connected. */
  async openWorkbench(workspace: string, opts: SandboxOptions): Promise<void> {
    const { dirs, env, record } = this.files;
    const { chromium } = await import('playwright-core');
    const context = await withTmpdir(dirs.tmp, () =>
      chromium.launchPersistentContext(dirs.chrome, {
        executablePath: STACK.chromium,
        headless: true,
        env,
        args: CHROMIUM_ARGS,
        timeout: this.startupMs,
        // Our own handlers stop the whole sandbox; Playwright's would exit before that finishes.
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
      }),
    );
    this.context = context;
    const chrome = listProcs().find((p) => p.ppid === process.pid && p.cmdline.includes(dirs.chrome));
    if (chrome) {
      record.chromiumPid = chrome.pid;
      addProcess(record, chrome.pid, true);
      writeRecord(record);
    }
    const page = context.pages()[0] ?? (await context.newPage());
    this.page = page;
    const browserLog = fs.createWriteStream(path.join(dirs.logs, 'browser.log'), { flags: 'a' });
    page.on('console', (msg) => browserLog.write(`[${msg.type()}] ${msg.text()}\n`));
    page.on('crash', () => {
      this.pageGone = true;
      this.progress('the workbench page crashed');
    });
    page.on('close', () => {
      this.pageGone = true;
    });
    await this.exposeTestDriver(page, browserLog, opts);
    this.workbenchUrl = `http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(workspace)}` + this.devPayload(opts);
    await page.goto(this.workbenchUrl, { waitUntil: 'domcontentloaded', timeout: this.startupMs });
    this.progress(`workbench open in headless Chromium${record.chromiumPid ? ` (pid ${record.chromiumPid})` : ''}`);
  }

  /** The workbench URL's payload naming the extension under development and its tests ('' without them). */
  private devPayload(opts: SandboxOptions): string {
    const remote = (p: string) => `vscode-remote://127.0.0.1:${this.port}${path.resolve(p)}`;
    const payload: [string, string][] = [];
    if (opts.extensionDevelopmentPath) payload.push(['extensionDevelopmentPath', remote(opts.extensionDevelopmentPath)]);
    if (opts.extensionTestsPath) payload.push(['extensionTestsPath', remote(opts.extensionTestsPath)]);
    return payload.length ? `&payload=${encodeURIComponent(JSON.stringify(payload))}` : '';
  }

  /** What @vscode/test-web does: the smoke-test driver reports the tests' exit and the extension host's console through page globals. */
  private async exposeTestDriver(page: Page, browserLog: fs.WriteStream, opts: SandboxOptions): Promise<void> {
    if (opts.extensionTestsPath) {
      this.testsExitCode = new Promise<number>((resolve) => {
        void page.exposeFunction('codeAutomationExit', (code: number) => resolve(Number(code)));
      });
    }
    if (opts.extensionDevelopmentPath || opts.extensionTestsPath) {
      await page.exposeFunction('codeAutomationLog', (type: string, args: unknown) => {
        // The console arguments as given (format string first): render them as console.log would.
        const text = formatWithOptions({ colors: false }, ...([] as unknown[]).concat(args));
        browserLog.write(`[exthost ${type}] ${text}\n`);
        opts.onLog?.(type, text);
      });
    }
  }

  private async shutdown(): Promise<void> {
    const { id, record } = this.files;
    record.status = 'stopping';
    if (fs.existsSync(recordPath(id))) writeRecord(record);
    if (this.context) {
      try {
        await withTimeout('closing Chromium', 10_000, this.context.close());
      } catch {
        if (record.chromiumPid) signal(-record.chromiumPid, 'SIGKILL');
      }
    }
    if (this.server && !this.serverExit) {
      signal(this.server.pid!, 'SIGTERM');
      const end = Date.now() + 8_000;
      while (!this.serverExit && Date.now() < end) await sleep(50);
    }
    // Give what is left of its group (the extension host deactivating) a moment, then kill it.
    const groupLeft = () => listProcs().filter((p) => record.pgids.includes(p.pgid));
    for (let i = 0; i < 30 && groupLeft().length; i++) await sleep(100);
    this.killNow();
    const strays = sandboxProcesses(record);
    for (const p of strays) signal(p.pid, 'SIGKILL');
    liveSandboxes.delete(this); // nothing left for the exit handler to kill
    if (strays.length)
      this.progress(
        `killed stray processes carrying ${MARKER_VAR}=${id}: ${strays.map((p) => `${p.pid} (${p.cmdline.slice(0, 60)})`).join(', ')}`,
      );
  }

  private async remove(): Promise<void> {
    const { id, root, dirs } = this.files;
    try {
      await this.halt();
    } finally {
      const kept = keepLogs(root, id);
      if (kept) this.progress(`logs kept in ${kept}`);
      removeTree(root);
      removeShortTmp(dirs.tmp);
      fs.rmSync(recordPath(id), { force: true });
    }
  }
}

export async function launchSandbox(opts: SandboxOptions): Promise<Sandbox> {
  const kind = opts.kind ?? 'sandbox';
  const id = opts.id ?? timedId(kind);
  if (!/^[A-Za-z0-9._-]+$/.test(id)) throw new SandboxError(`bad sandbox id: ${id}`);
  const workspace = path.resolve(opts.workspace);
  checkLaunchInputs(opts, workspace);

  fs.mkdirSync(STACK.runsDir, { recursive: true });
  const root = path.join(STACK.runsDir, id);
  if (fs.existsSync(root)) throw new SandboxError(`sandbox root already exists: ${root}`);
  const dirs = makeDirs(root);
  if (opts.venvKernelspec) writeVenvKernelspec(dirs);
  const files: LaunchFiles = {
    id,
    root,
    dirs,
    env: sandboxEnv(id, dirs, opts),
    common: writeCodeServerConfig(root, dirs, opts.settings),
    record: startRecord(id, kind, root, dirs, workspace),
    serverLog: path.join(dirs.logs, 'code-server.log'),
  };

  const sandbox = new SandboxProcesses(files, opts.onProgress ?? defaultProgress, opts.startupTimeoutMs ?? 60_000);
  if (opts.handleSignals !== false) installSignalHandlers();
  liveSandboxes.add(sandbox);
  try {
    sandbox.installExtensions([...(opts.vsix ? [opts.vsix] : []), ...(opts.otherVsix ?? [])]);
    await sandbox.startCodeServer(workspace, Boolean(opts.extensionDevelopmentPath || opts.extensionTestsPath));
    await sandbox.openWorkbench(workspace, opts);
    files.record.status = 'running';
    writeRecord(files.record);
  } catch (err) {
    return sandbox.fail(err);
  }

  return {
    id,
    root,
    dirs,
    env: files.env,
    codeServerPort: sandbox.port,
    codeServerPid: sandbox.server!.pid!,
    workspace,
    workbenchUrl: sandbox.workbenchUrl,
    page: sandbox.page!,
    testsExitCode: sandbox.testsExitCode,
    logTail: sandbox.logTail,
    alive: sandbox.alive,
    waitFor: sandbox.waitFor,
    halt: sandbox.halt,
    stop: sandbox.stop,
  };
}

/** Sets `info` on the sandbox's record (e.g. the bridge URL, for sandbox-up). */
export function publishInfo(id: string, info: Record<string, unknown>): void {
  const record = readRecord(id);
  if (!record) return;
  record.info = { ...record.info, ...info };
  writeRecord(record);
}

// --------------------------------------------------------------------------------------- CLI

const USAGE = `usage: tsx sandbox-test/vscode.ts --workspace DIR (--vsix FILE | --dev DIR [--tests FILE])
         [--extension FILE]... [--id ID] [--kind KIND] [--env K=V]... [--setting KEY=JSON]... [--timeout SECONDS]
  Other extensions: --extension FILE and SANDBOX_EXTENSIONS=/a.vsix:/b.vsix (installed first).
  With --tests: runs the tests in the extension host, stops, exits with their exit code.
  Otherwise: keeps the sandbox running until SIGTERM/SIGINT (sandbox-up runs it detached).
  AGENT_BRIDGE_DISCOVERY_FILE defaults to <sandbox root>/bridge.json.`;

/** Workbench chatter forwarded with the extension host's console; hidden unless VERBOSE=1. */
const WORKBENCH_NOISE =
  /ENOTFOUND|ERR_NAME_NOT_RESOLVED|getaddrinfo|^(Resolving connection token|Resolved connection token|Creating a socket|\[reconnection-grace-time\]|Updating additional builtin|\[Service Worker\]|\[AccountPolicyGate\]|\[AgentHost|Timed out waiting for authentication provider|\s+at )/;

/** The CLI's arguments (see USAGE); throws with the usage on anything else. */
function cliOptions(argv: string[]) {
  const parse = () =>
    parseArgs({
      args: argv,
      options: {
        workspace: { type: 'string' },
        vsix: { type: 'string' },
        extension: { type: 'string', multiple: true, default: [] },
        dev: { type: 'string' },
        tests: { type: 'string' },
        id: { type: 'string' },
        kind: { type: 'string' },
        env: { type: 'string', multiple: true, default: [] },
        setting: { type: 'string', multiple: true, default: [] },
        timeout: { type: 'string', default: '600' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  let values: ReturnType<typeof parse>;
  try {
    values = parse();
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${USAGE}`, { cause: err });
  }
  const env: Record<string, string> = {};
  for (const pair of values.env) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--env wants K=V, got ${pair}`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const settings: Record<string, unknown> = {};
  for (const pair of values.setting) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--setting wants KEY=JSON, got ${pair}`);
    try {
      settings[pair.slice(0, eq)] = JSON.parse(pair.slice(eq + 1));
    } catch {
      throw new Error(`--setting ${pair.slice(0, eq)}: the value is not JSON`);
    }
  }
  const timeoutSeconds = Number(values.timeout);
  if (!(timeoutSeconds > 0)) throw new Error(`--timeout wants seconds, got ${values.timeout}`);
  return { ...values, env, settings, timeoutMs: timeoutSeconds * 1000 };
}

async function main(argv: string[]): Promise<number> {
  const values = cliOptions(argv);
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const { workspace, tests, timeoutMs } = values;
  if (!workspace) throw new Error(`--workspace is required\n${USAGE}`);
  const extensions = givenExtensions(values.extension);
  console.log(`other extensions: ${describeExtensions(extensions)}`);
  const sandbox = await launchSandbox({
    workspace,
    vsix: values.vsix,
    otherVsix: extensions.map((e) => e.vsix),
    venvKernelspec: 'extension' in findExtension(extensions, JUPYTER_ID),
    extensionDevelopmentPath: values.dev,
    extensionTestsPath: tests,
    settings: values.settings,
    id: values.id,
    kind: values.kind ?? (tests ? 'tests' : 'cli'),
    env: (dirs) => ({
      AGENT_BRIDGE_DISCOVERY_FILE: process.env['AGENT_BRIDGE_DISCOVERY_FILE'] || path.join(dirs.root, 'bridge.json'),
      ...values.env,
    }),
    onLog: (type, text) => {
      if (process.env['VERBOSE'] !== '1' && WORKBENCH_NOISE.test(text)) return;
      if (tests || type === 'error') process.stdout.write(`${text}\n`);
    },
  });
  if (sandbox.testsExitCode) {
    let code: number;
    const t0 = Date.now();
    try {
      code = await withTimeout('extension tests', timeoutMs, sandbox.testsExitCode);
      defaultProgress(`tests finished with exit code ${code} after ${Date.now() - t0} ms`);
    } catch (err) {
      process.stderr.write(`${(err as Error).message}\n${sandbox.logTail()}\n`);
      code = 124;
    }
    const t1 = Date.now();
    await sandbox.stop();
    defaultProgress(`sandbox stopped and removed in ${Date.now() - t1} ms`);
    return code;
  }
  // Hold: the owner of a detached sandbox. Stops on SIGTERM (handled by launchSandbox) or when
  // code-server dies on its own.
  process.stdout.write(JSON.stringify({ id: sandbox.id, root: sandbox.root, codeServerPort: sandbox.codeServerPort }) + '\n');
  while (sandbox.alive()) await sleep(500);
  process.stderr.write(`sandbox ${sandbox.id}: code-server or the workbench went away; stopping\n${sandbox.logTail()}\n`);
  await sandbox.stop();
  return 1;
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${errorMessage(err)}\n`);
      process.exit(1);
    },
  );
}
