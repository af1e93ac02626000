/**
 * The sandbox harness: `tsx sandbox-test/run.ts [--no-build] [--only TEXT] [--vsix FILE]`.
 *
 * Builds and packages the extension (unless --no-build), copies the fixtures into a temp
 * workspace, launches an isolated VS Code with the .vsix installed, finds the bridge through its
 * discovery file (never by guessing ports), opens the fixture notebooks through the bridge with
 * the builtin kernel, runs the checks, stops VS Code, and checks that the discovery files are gone.
 *
 * Environment: MARIMO_PAIR_SCRIPTS=<folder with marimo-pair's scripts> enables the script checks;
 * VSCODE_JUPYTER_SOURCE=<vscode-jupyter checkout> (built by `npm run setup`) the Jupyter checks;
 * KEEP_LOGS=<dir> keeps the sandbox's logs; VERBOSE=1 prints check notes.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { Harness } from './harness';
import { BridgeClient } from './http';
import { launchSandbox, REPO_ROOT, type Sandbox } from './vscode';
import { type BridgeAdvert, type CheckContext, findAdvertCopies, type OpenedNotebook, type SessionInfo } from './checks/context';
import { registerAccessChecks } from './checks/access';
import { registerCellChecks } from './checks/cells';
import { registerChaosChecks } from './checks/chaos';
import { findJupyterExtension, registerJupyterChecks } from './checks/jupyter';
import { registerAfterStopChecks, registerDiscoveryChecks } from './checks/discovery';
import { registerIPythonChecks } from './checks/ipython';
import { registerMarimoChecks } from './checks/marimo';
import { registerReloadChecks } from './checks/reload';
import { registerScriptChecks } from './checks/scripts';
import { registerSecurityChecks } from './checks/security';

const FIXTURES = path.join(REPO_ROOT, 'sandbox-test', 'fixtures');
const DEFAULT_VSIX = path.join(REPO_ROOT, 'dist', 'agent-bridge.vsix');

/** `[--no-build] [--only TEXT] [--vsix FILE]`; a given .vsix is used as it is, not built. */
function options(): { build: boolean; only: string | undefined; vsix: string } {
  const { values } = parseArgs({
    options: { 'no-build': { type: 'boolean', default: false }, only: { type: 'string' }, vsix: { type: 'string' } },
  });
  return { build: !values['no-build'] && !values.vsix, only: values.only, vsix: path.resolve(values.vsix ?? DEFAULT_VSIX) };
}

const t0 = Date.now();
const stamp = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
const say = (msg: string) => process.stderr.write(`[harness ${stamp()}] ${msg}\n`);

function build(): void {
  say('npm run package');
  const r = spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`npm run package failed (status ${r.status})`);
}

/** Copies the fixtures into a fresh temp folder (real path, so paths compare exactly). */
function makeWorkspace(): string {
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-ws-')));
  fs.cpSync(FIXTURES, ws, { recursive: true });
  return ws;
}

async function findBridge(sandbox: Sandbox, discoveryFile: string): Promise<BridgeAdvert> {
  const advert = await sandbox.waitFor(
    `the bridge's discovery file ${discoveryFile}`,
    () => {
      if (!fs.existsSync(discoveryFile)) return undefined;
      const a = JSON.parse(fs.readFileSync(discoveryFile, 'utf8')) as BridgeAdvert;
      return Number.isInteger(a.port) && a.port > 0 ? a : undefined;
    },
    60_000,
  );
  const client = new BridgeClient(advert.url, advert.token);
  await sandbox.waitFor(
    `${advert.url}/health`,
    async () => (await client.get('/health', { timeoutMs: 2000 })).status === 200,
    15_000,
  );
  return advert;
}

async function openNotebook(client: BridgeClient, file: string): Promise<OpenedNotebook> {
  const r = await client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { timeoutMs: 30_000 });
  if (r.status !== 200) throw new Error(`POST /notebooks/open ${path.basename(file)}: ${r.status} ${r.text.slice(0, 300)}`);
  const session = r.json<{ session: SessionInfo }>().session;
  if (!session?.id) throw new Error(`POST /notebooks/open ${path.basename(file)}: no session in ${r.text.slice(0, 300)}`);
  return { name: path.basename(file, '.ipynb'), path: file, session };
}

async function main(): Promise<number> {
  const args = options();
  const harness = new Harness({ only: args.only, defaultTimeoutMs: 15_000 });
  if (args.build) build();
  if (!fs.existsSync(args.vsix)) throw new Error(`${args.vsix} not found (run without --no-build, or npm run package)`);

  // A stray async error (a socket emitting 'error' after its check ended, say) must not kill the
  // run and leave VS Code behind: record it as a failure and carry on.
  process.on('uncaughtException', (err) =>
    harness.record(`uncaught exception`, 'fail', err.stack?.split('\n').slice(0, 3).join(' ') ?? String(err)),
  );

  const jupyter = findJupyterExtension();
  const workspace = makeWorkspace();
  process.on('exit', () => fs.rmSync(workspace, { recursive: true, force: true })); // also on Ctrl+C
  let sandbox: Sandbox | undefined;
  let ctx: CheckContext | undefined;
  try {
    say(`launching VS Code (workspace ${workspace})`);
    sandbox = await launchSandbox({
      workspace,
      vsix: args.vsix,
      kind: 'harness',
      otherVsix: 'vsix' in jupyter ? [jupyter.vsix] : [],
      env: (dirs) => ({ AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json') }),
    });
    const vscodeUp = Date.now();
    const discoveryFile = path.join(sandbox.root, 'bridge.json');
    const advert = await findBridge(sandbox, discoveryFile);
    const bridgeUp = Date.now();
    say(`bridge at ${advert.url} (extension host pid ${advert.pid})`);
    const client = new BridgeClient(advert.url, advert.token);
    // Sequential on purpose: each open shows an editor and selects a kernel; the first takes ~3 s.
    const analysis = await openNotebook(client, path.join(workspace, 'analysis.ipynb'));
    const other = await openNotebook(client, path.join(workspace, 'other.ipynb'));
    say(`opened analysis.ipynb (${analysis.session.id}) and other.ipynb (${other.session.id})`);
    const checksStart = Date.now();
    const registryDir = path.join(sandbox.dirs.stateHome, 'marimo', 'servers');
    ctx = {
      sandbox,
      workspace,
      discoveryFile,
      advert,
      registryDir,
      registryFile: path.join(registryDir, `127.0.0.1_${advert.port}.json`),
      client,
      analysis,
      other,
      scriptsDir: process.env['MARIMO_PAIR_SCRIPTS'] ? path.resolve(process.env['MARIMO_PAIR_SCRIPTS']) : undefined,
    };
    registerDiscoveryChecks(harness, ctx);
    registerMarimoChecks(harness, ctx);
    registerCellChecks(harness, ctx);
    registerScriptChecks(harness, ctx);
    registerSecurityChecks(harness, ctx);
    registerChaosChecks(harness, ctx);
    registerAccessChecks(harness, ctx);
    registerJupyterChecks(harness, ctx, jupyter);
    registerIPythonChecks(harness, ctx); // it switches the kernel's Python
    registerReloadChecks(harness, ctx, jupyter); // last: it restarts the window
    await harness.runPending();
    say(
      `checks took ${((Date.now() - checksStart) / 1000).toFixed(1)} s (${((Date.now() - vscodeUp) / 1000).toFixed(1)} s since the workbench opened, ` +
        `${((Date.now() - bridgeUp) / 1000).toFixed(1)} s since the bridge answered)`,
    );
  } catch (err) {
    harness.record('setup', 'fail', headAndTail((err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ')));
    if (sandbox) process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
  } finally {
    if (sandbox) {
      const copies = ctx ? findAdvertCopies(ctx) : [];
      const t = Date.now();
      await sandbox.stop({
        beforeRemove: async () => {
          if (!ctx) return;
          registerAfterStopChecks(harness, ctx, copies);
          await harness.runPending();
        },
      });
      say(`VS Code stopped and cleaned up in ${Date.now() - t} ms`);
    }
    fs.rmSync(workspace, { recursive: true, force: true });
  }
  return harness.finish();
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);

/** A long error kept readable: its start says what failed, its end (a browser's log) says why. */
function headAndTail(text: string, head = 300, tail = 900): string {
  return text.length <= head + tail ? text : `${text.slice(0, head)} … ${text.slice(-tail)}`;
}
