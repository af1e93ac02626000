/**
 * A real marimo server for the conformance suite: `marimo edit --headless` from the stack's venv,
 * on 127.0.0.1, on a copy of the marimo fixtures, with its own HOME and XDG state (so its server
 * registry is its own) and the sandbox's marker in its environment (so cleanup finds it).
 *
 * A headless marimo has no session until a front end connects. A session here is what the
 * browser would make: a GET on marimo's `/sse` transport (`?session_id=&file=`), held open for
 * the server's life, then the notebook's cells run once (`/api/kernel/instantiate` with autoRun),
 * as the editor does on open, so the globals the cells define exist. The front end's POSTs carry
 * a skew-protection header read from the page; `/api/kernel/execute` is exempt from it (marimo's
 * middleware), so the server runs with --no-skew-protection and nothing the scripts see changes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { BridgeClient } from '../http';
import { sleep } from '../../src/core/sleep';
import { freePort, MARKER_VAR, REPO_ROOT, STACK } from '../vscode';

export const MARIMO_BIN = path.join(STACK.venvBin, 'marimo');
/** The marimo twins of the .ipynb fixtures: the same cells, the same globals. */
export const MARIMO_FIXTURES = { analysis: 'analysis_marimo.py', other: 'other_marimo.py' } as const;
const START_TIMEOUT_MS = 60_000;

export interface MarimoServer {
  url: string;
  port: number;
  /** null: started with --no-token. */
  token: string | null;
  /** The folder holding the notebook copies. */
  dir: string;
  home: string;
  stateHome: string;
  /** The registry folder discover-servers.sh reads for this server's HOME. */
  registryDir: string;
  client: BridgeClient;
  /** Opens a session on `file` (a name in `dir`) under the id given, runs its cells; resolves when ready. */
  openSession(id: string, file: string): Promise<void>;
  stop(): Promise<void>;
}

/** Why the marimo server cannot run here, or undefined when it can. */
export function marimoMissing(): string | undefined {
  return fs.existsSync(MARIMO_BIN) ? undefined : `no marimo in the stack's venv (${MARIMO_BIN}; run npm run setup)`;
}

/** Starts a marimo server on copies of the marimo fixtures; `token: null` starts it with --no-token. */
export async function startMarimo(opts: { token: string | null; sandboxId: string; stateHome?: string }): Promise<MarimoServer> {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-marimo-')));
  const dir = path.join(root, 'notebooks');
  const home = path.join(root, 'home');
  const stateHome = opts.stateHome ?? path.join(home, '.local', 'state');
  fs.mkdirSync(dir, { recursive: true });
  fs.mkdirSync(stateHome, { recursive: true });
  for (const name of Object.values(MARIMO_FIXTURES))
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', name), path.join(dir, name));
  const port = await freePort();
  const tokenArgs = opts.token === null ? ['--no-token'] : ['--token-password', opts.token];
  const child = spawn(
    MARIMO_BIN,
    [
      '-q',
      '-y',
      'edit',
      '--headless',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      ...tokenArgs,
      '--skip-update-check',
      '--no-skew-protection',
      dir,
    ],
    {
      cwd: root,
      detached: true, // its own process group: stop() ends the server and its kernels together
      stdio: ['ignore', 'pipe', 'pipe'],
      env: marimoEnv(home, stateHome, opts.sandboxId),
    },
  );
  let log = '';
  const keep = (d: Buffer) => (log = (log + d.toString('utf8')).slice(-8000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  const client = new BridgeClient(url, opts.token);
  const streams: http.ClientRequest[] = [];
  const stop = () => stopGroup(child, streams, root);
  try {
    const end = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`marimo exited with ${child.exitCode}: ${log.slice(-2000)}`);
      const up = await client.get('/health', { timeoutMs: 2000 }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (up) break;
      if (Date.now() > end) throw new Error(`marimo did not answer /health within ${START_TIMEOUT_MS} ms: ${log.slice(-2000)}`);
      await sleep(250);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url,
    port,
    token: opts.token,
    dir,
    home,
    stateHome,
    registryDir: path.join(stateHome, 'marimo', 'servers'),
    client,
    openSession: async (id, file) => {
      streams.push(await connectFrontEnd(port, opts.token, id, path.join(dir, file)));
      const r = await client.post(
        '/api/kernel/instantiate',
        { objectIds: [], values: [], autoRun: true },
        { headers: { 'marimo-session-id': id }, timeoutMs: 30_000 },
      );
      if (r.status !== 200) throw new Error(`marimo instantiate ${file}: ${r.status} ${r.text.slice(0, 300)}`);
    },
    stop,
  };
}

function marimoEnv(home: string, stateHome: string, sandboxId: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_STATE_HOME: stateHome, [MARKER_VAR]: sandboxId };
  delete env['MARIMO_TOKEN'];
  return env;
}

/** The front end's event stream for a new session; resolves once the kernel said it is ready. */
function connectFrontEnd(port: number, token: string | null, id: string, file: string): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const query = new URLSearchParams({ session_id: id, file });
    const req = http.request({
      host: '127.0.0.1',
      port,
      path: `/sse?${query}`,
      headers: token ? { authorization: `Bearer ${token}` } : {},
      agent: false,
    });
    const timer = setTimeout(() => req.destroy(new Error(`marimo session ${id}: no kernel-ready within 60 s`)), 60_000);
    req.on('response', (res) => {
      let seen = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (seen === 'ready') return;
        seen = (seen + d).slice(-4096);
        if (seen.includes('"kernel-ready"')) {
          seen = 'ready';
          clearTimeout(timer);
          resolve(req);
        }
      });
      res.on('error', () => undefined); // destroyed on stop
    });
    req.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    req.end();
  });
}

async function stopGroup(child: ChildProcess, streams: http.ClientRequest[], root: string): Promise<void> {
  for (const s of streams) s.destroy();
  const exited = new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  const kill = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      /* already gone */
    }
  };
  kill('SIGTERM');
  const t = setTimeout(() => kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(t);
  kill('SIGKILL'); // kernels the server started, if any outlived it
  fs.rmSync(root, { recursive: true, force: true });
}

/** A token of the shape marimo makes. */
