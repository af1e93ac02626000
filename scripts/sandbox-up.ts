/**
 * `npm run sandbox-up [-- WORKSPACE] [--build|--no-build] [--extension FILE]...`: starts an isolated
 * VS Code with the packaged extension and leaves it running, for poking at the bridge by hand or
 * with an agent. Other extensions come in by path: `--extension FILE` and
 * SANDBOX_EXTENSIONS=/a.vsix:/b.vsix are installed beside ours (sandbox-test/extensions.ts).
 *
 * Packages the extension when dist/agent-bridge.vsix is missing or older than the sources, copies
 * the fixtures into a workspace (or uses WORKSPACE), starts a detached launcher process
 * (sandbox-test/vscode.ts) that owns the sandbox and records it in .vscode-test/sandboxes/,
 * waits for the bridge, opens the workspace's notebooks through it (.ipynb with the builtin
 * kernel, marimo notebooks with the marimo extension's kernel), prints how to connect, and exits.
 * `npm run sandbox-down` stops it. The marimo extension is the real one when given (with
 * ms-python.python), else the FAKE of the harness (sandbox-test/marimoExtension.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { BridgeClient } from '../sandbox-test/http';
import {
  MARKER_VAR,
  REPO_ROOT,
  STACK,
  type SandboxRecord,
  publishInfo,
  readRecord,
  recordPath,
  stopRecorded,
} from '../sandbox-test/vscode';
import { describeExtensions, givenExtensions } from '../sandbox-test/extensions';
import { marimoUnderTest } from '../sandbox-test/marimoExtension';
import { runMain } from './runMain';
import { errorMessage } from '../src/core/errorMessage';
import { timedId } from '../src/core/ids';
import { sleep } from '../src/core/sleep';
import { progressLog } from '../sandbox-test/progress';

const VSIX = path.join(REPO_ROOT, 'dist', 'agent-bridge.vsix');
const FIXTURES = path.join(REPO_ROOT, 'sandbox-test', 'fixtures');
const TSX_LOADER = path.join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');

const say = progressLog('sandbox-up');

function newestMtime(target: string): number {
  const st = fs.statSync(target, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const e of fs.readdirSync(target)) newest = Math.max(newest, newestMtime(path.join(target, e)));
  return newest;
}

function packageIfNeeded(mode: 'auto' | 'always' | 'never'): void {
  if (mode === 'never') return;
  const vsixTime = fs.statSync(VSIX, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const sources = Math.max(
    ...['src', 'package.json', 'media', 'resources', 'python'].map((p) => newestMtime(path.join(REPO_ROOT, p))),
  );
  if (mode === 'auto' && vsixTime > sources) return;
  say(vsixTime ? 'sources changed since the last package: npm run package' : 'npm run package');
  const r = spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 2, 2] });
  if (r.status !== 0) throw new Error(`npm run package failed (status ${r.status})`);
}

/** A `.py` file in marimo's format (it makes a `marimo.App`). */
function isMarimoNotebook(file: string): boolean {
  return file.endsWith('.py') && /^app = marimo\.App\(/m.test(fs.readFileSync(file, 'utf8').slice(0, 4000));
}

function notebooksIn(dir: string, depth = 0, out: string[] = []): string[] {
  if (depth > 3 || out.length >= 20) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name.startsWith('.') || e.name === 'node_modules') continue;
    const full = path.join(dir, e.name);
    if (e.isDirectory()) notebooksIn(full, depth + 1, out);
    else if (e.isFile() && (e.name.endsWith('.ipynb') || isMarimoNotebook(full)) && out.length < 20) out.push(full);
  }
  return out.sort();
}

async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => T | undefined | Promise<T | undefined>,
  alive: () => void,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    alive();
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch {
      /* not yet */
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

function tail(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no launcher log)';
  }
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      build: { type: 'boolean', default: false },
      'no-build': { type: 'boolean', default: false },
      extension: { type: 'string', multiple: true, default: [] },
    },
    allowPositionals: true,
  });
  if (positionals.length > 1)
    throw new Error('usage: npm run sandbox-up -- [WORKSPACE] [--build|--no-build] [--extension FILE]...');
  const extensions = givenExtensions(values.extension); // read now: a bad path fails before anything starts
  say(`other extensions: ${describeExtensions(extensions)}`);
  const buildMode = values['no-build'] ? 'never' : values.build ? 'always' : 'auto';
  const workspaceArg = positionals[0];
  packageIfNeeded(buildMode);
  if (!fs.existsSync(VSIX)) throw new Error(`${VSIX} not found`);

  const id = timedId('up');
  let workspace: string;
  let ownedWorkspace: string | undefined;
  if (workspaceArg) {
    workspace = fs.realpathSync(path.resolve(workspaceArg));
  } else {
    ownedWorkspace = path.join(STACK.workspacesDir, id);
    fs.mkdirSync(ownedWorkspace, { recursive: true });
    fs.cpSync(FIXTURES, ownedWorkspace, { recursive: true });
    workspace = fs.realpathSync(ownedWorkspace);
  }

  fs.mkdirSync(STACK.recordsDir, { recursive: true });
  // The fake's .vsix is packed next to the record, removed once the launcher installed it.
  const packDir = fs.mkdtempSync(path.join(STACK.recordsDir, `${id}-fake-`));
  const marimo = marimoUnderTest(extensions, packDir);
  say(`marimo notebooks open with ${marimo.describe}`);
  const logFile = path.join(STACK.recordsDir, `${id}.log`);
  const out = fs.openSync(logFile, 'a');
  const launcher = spawn(
    process.execPath,
    [
      '--import',
      TSX_LOADER,
      path.join(REPO_ROOT, 'sandbox-test', 'vscode.ts'),
      '--workspace',
      workspace,
      '--vsix',
      VSIX,
      '--id',
      id,
      '--kind',
      'up',
      ...extensions.flatMap((e) => ['--extension', e.vsix]),
      ...(marimo.vsix ? ['--extension', marimo.vsix] : []),
      ...Object.entries(marimo.settings).flatMap(([key, value]) => ['--setting', `${key}=${JSON.stringify(value)}`]),
      ...Object.entries(marimo.env).flatMap(([key, value]) => ['--env', `${key}=${value}`]),
    ],
    {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', out, out],
      // The flags above already name every given extension.
      env: { ...process.env, SANDBOX_EXTENSIONS: '', [MARKER_VAR]: id, AGENT_BRIDGE_SANDBOX_LOG: logFile },
    },
  );
  fs.closeSync(out);
  launcher.unref();
  say(`launcher ${launcher.pid} starting sandbox ${id} (log: ${path.relative(REPO_ROOT, logFile)})`);

  let record: SandboxRecord | undefined;
  const alive = () => {
    if (launcher.exitCode !== null || launcher.signalCode !== null)
      throw new Error(`the launcher exited (${launcher.exitCode ?? launcher.signalCode}):\n${tail(logFile)}`);
  };
  try {
    record = await waitFor(
      'the sandbox to start',
      120_000,
      () => {
        const r = readRecord(id);
        if (r?.status === 'failed') throw Object.assign(new Error(r.error), { fatal: true });
        return r?.status === 'running' ? r : undefined;
      },
      alive,
    );
    fs.rmSync(packDir, { recursive: true, force: true });
    if (ownedWorkspace) publishInfo(id, { ownedWorkspace });
    const discoveryFile = path.join(record.root, 'bridge.json');
    const advert = await waitFor(
      `the bridge's discovery file ${discoveryFile}`,
      60_000,
      () => {
        const a = JSON.parse(fs.readFileSync(discoveryFile, 'utf8'));
        return Number.isInteger(a.port) ? (a as { url: string; port: number; token: string | null }) : undefined;
      },
      alive,
    );
    const client = new BridgeClient(advert.url, advert.token);
    await waitFor(
      `${advert.url}/health`,
      15_000,
      async () => ((await client.get('/health', { timeoutMs: 2000 })).status === 200 ? true : undefined),
      alive,
    );
    const opened: { id: string; path: string }[] = [];
    for (const nb of notebooksIn(workspace)) {
      const kernel = nb.endsWith('.py') ? 'marimo' : 'builtin';
      const r = await client.post('/notebooks/open', { path: nb, kernel }, { timeoutMs: 150_000 });
      if (r.status === 200) opened.push({ id: r.json().session?.id, path: nb });
      else say(`could not open ${nb}: ${r.status} ${r.text.slice(0, 200)}`);
    }
    const stateHome = path.join(record.root, 'home', '.local', 'state');
    publishInfo(id, { url: advert.url, discoveryFile, stateHome, notebooks: opened });

    const scripts = process.env['MARIMO_PAIR_SCRIPTS'] || '<marimo-pair>/scripts';
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const lines = [
      `Agent Bridge sandbox ${id} is running (launcher pid ${launcher.pid}).`,
      `  bridge:     ${advert.url}`,
      `  token:      ${advert.token ?? '(none)'}`,
      `  discovery:  ${discoveryFile}`,
      `  registry:   XDG_STATE_HOME=${stateHome}   (for discover-servers.sh)`,
      `  workspace:  ${workspace}`,
      ...opened.map((n) => `  notebook:   ${n.id}  ${n.path}`),
      '',
      'Run code in a notebook:',
      `  MARIMO_TOKEN=${advert.token ?? ''} bash ${scripts}/execute-code.sh --url ${advert.url}` +
        (opened[0] ? ` --file ${q(opened[0].path)}` : '') +
        ` -c 'print(1 + 1)'`,
      '',
      'Stop it with: npm run sandbox-down',
    ];
    process.stdout.write(lines.join('\n') + '\n');
    return 0;
  } catch (err) {
    fs.rmSync(packDir, { recursive: true, force: true });
    say(`failed: ${errorMessage(err)}`);
    const r = readRecord(id) ?? record;
    if (r) say(await stopRecorded(r));
    else if (launcher.exitCode === null && launcher.signalCode === null) launcher.kill('SIGTERM');
    if (!fs.existsSync(recordPath(id)) && ownedWorkspace) fs.rmSync(ownedWorkspace, { recursive: true, force: true });
    return 1;
  }
}

runMain(main);
