/**
 * The harness's root hooks (mocha). Before every suite: copy the fixtures into a temp workspace,
 * launch an isolated VS Code with the .vsix installed, find the bridge through its discovery file
 * (never by guessing ports) and open the fixture notebooks through it with the builtin kernel: the
 * checks' context(). Around every check: its AbortSignal and notes (checkRun()). After every
 * suite: stop VS Code (unless the `after stop` suite already halted it) and remove its files and
 * the workspace.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BridgeClient } from './http';
import { launchSandbox, REPO_ROOT, type Sandbox, SandboxError } from './vscode';
import { beginCheck, endCheck, findBridge, type OpenedNotebook, type SessionInfo, setContext } from './checks/context';
import { findExtension, type GivenExtension, JUPYTER_ID } from './extensions';
import type { MarimoUnderTest } from './marimoExtension';
import { progressLog } from './progress';

const FIXTURES = path.join(REPO_ROOT, 'sandbox-test', 'fixtures');
/** Launching, installing two extensions, finding the bridge and opening two notebooks, on a slow shared machine. */
const LAUNCH_TIMEOUT_MS = 300_000;

/** Progress on stderr, stamped with the seconds since the harness started. */
export const say = progressLog('harness');

/** Copies the fixtures into a fresh temp folder (real path, so paths compare exactly). */
function makeWorkspace(): string {
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-ws-')));
  fs.cpSync(FIXTURES, ws, { recursive: true });
  return ws;
}

async function openNotebook(client: BridgeClient, file: string): Promise<OpenedNotebook> {
  const r = await client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { timeoutMs: 30_000 });
  if (r.status !== 200) throw new Error(`POST /notebooks/open ${path.basename(file)}: ${r.status} ${r.text.slice(0, 300)}`);
  const session = r.json<{ session: SessionInfo }>().session;
  if (!session?.id) throw new Error(`POST /notebooks/open ${path.basename(file)}: no session in ${r.text.slice(0, 300)}`);
  return { name: path.basename(file, '.ipynb'), path: file, session };
}

/** One line per note, indented under the check's result line. */
function printNotes(notes: string[]): void {
  for (const n of notes) {
    const flat = n.replace(/\s+/g, ' ').trim();
    process.stdout.write(`      note: ${flat.length > 2000 ? `${flat.slice(0, 2000)}…` : flat}\n`);
  }
}

/** Declares the root hooks; call at the root of the suite tree (see run.ts). */
export function rootHooks(opts: { vsix: string; extensions: readonly GivenExtension[]; marimo: MarimoUnderTest }): void {
  const verbose = process.env['VERBOSE'] === '1';
  let workspace: string | undefined;
  let sandbox: Sandbox | undefined;
  let launching: Promise<void> | undefined;
  let checksStart = 0;

  const launch = async () => {
    const ws = (workspace = makeWorkspace());
    process.on('exit', () => fs.rmSync(ws, { recursive: true, force: true })); // also on Ctrl+C
    say(`launching VS Code (workspace ${ws})`);
    sandbox = await launchSandbox({
      workspace: ws,
      vsix: opts.vsix,
      kind: 'harness',
      otherVsix: [...opts.extensions.map((e) => e.vsix), ...(opts.marimo.vsix ? [opts.marimo.vsix] : [])],
      venvKernelspec: 'extension' in findExtension(opts.extensions, JUPYTER_ID),
      settings: opts.marimo.settings,
      env: (dirs) => ({ ...opts.marimo.env, AGENT_BRIDGE_DISCOVERY_FILE: path.join(dirs.root, 'bridge.json') }),
    });
    const discoveryFile = path.join(sandbox.root, 'bridge.json');
    const advert = await findBridge(sandbox, discoveryFile);
    say(`bridge at ${advert.url} (extension host pid ${advert.pid})`);
    const client = new BridgeClient(advert.url, advert.token);
    // Sequential on purpose: each open shows an editor and selects a kernel; the first takes ~3 s.
    const analysis = await openNotebook(client, path.join(ws, 'analysis.ipynb'));
    const other = await openNotebook(client, path.join(ws, 'other.ipynb'));
    say(`opened analysis.ipynb (${analysis.session.id}) and other.ipynb (${other.session.id})`);
    const registryDir = path.join(sandbox.dirs.stateHome, 'marimo', 'servers');
    setContext({
      sandbox,
      workspace: ws,
      discoveryFile,
      advert,
      registryDir,
      registryFile: path.join(registryDir, `127.0.0.1_${advert.port}.json`),
      client,
      analysis,
      other,
      marimo: opts.marimo,
    });
  };

  before('launch VS Code, find the bridge, open the fixture notebooks', async function () {
    this.timeout(LAUNCH_TIMEOUT_MS);
    try {
      await (launching = launch());
      checksStart = Date.now();
    } catch (err) {
      // A SandboxError's message ends with code-server's log tail; print it for the others.
      if (sandbox && !(err instanceof SandboxError))
        process.stderr.write(`--- code-server log (tail) ---\n${sandbox.logTail(30)}\n`);
      throw err;
    }
  });

  beforeEach(beginCheck);

  afterEach(function () {
    const notes = endCheck();
    if (this.currentTest?.state === 'failed' || verbose) printNotes(notes);
  });

  after('stop VS Code and remove its files and the workspace', async function () {
    this.timeout(LAUNCH_TIMEOUT_MS);
    if (checksStart) say(`checks took ${((Date.now() - checksStart) / 1000).toFixed(1)} s`);
    setContext(undefined);
    await launching?.catch(() => undefined); // a launch that timed out may still hand over a sandbox
    if (sandbox) {
      const t = Date.now();
      await sandbox.stop();
      say(`VS Code stopped (unless the after-stop suite did) and its files removed in ${Date.now() - t} ms`);
    }
    if (workspace) fs.rmSync(workspace, { recursive: true, force: true });
  });
}
