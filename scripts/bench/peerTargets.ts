/**
 * The targets `npm run bench -- --peers` measures, each behind one interface: the bridge and a
 * `marimo edit --headless` server, both driven by the bench's own HTTP/SSE client on marimo's
 * surface (and by marimo-pair's real execute-code.sh for the script row only), and Jupyter
 * Server + datalayer's jupyter-mcp-server driven by the MCP TypeScript SDK client. Each peer is
 * started here, on a free loopback port with a token, and stopped by `stop()` (its whole process
 * group).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocket } from 'undici';
import { sleep } from '../../src/core/sleep';
import { freePort } from '../../sandbox-test/vscode';
import { BenchClient, type ExecResult } from './client';
import { errorMessage } from '../../src/core/errorMessage';
import { randomHex } from '../../src/core/ids';

/** A scratchpad run's answer as a Timed's: its stdout, or why it failed (the transport's error, else its stderr). */
function execAnswer(r: ExecResult): { ok: boolean; out: string } {
  const ok = !r.error && r.done?.success === true;
  return { ok, out: r.error ?? (ok ? r.stdout : r.stderr || r.stdout) };
}

/** One timed call: ms to its answer, whether it did what was asked, and what it gave back. */
export interface Timed {
  ms: number;
  ok: boolean;
  out: string;
}

export interface PeerTarget {
  readonly name: string;
  /** Code run outside the notebook (scratchpad / execute_code), to its end. */
  scratch(code: string): Promise<Timed>;
  /** The same, until the client holds all it printed (`out`): where the answer is capped, the rest is fetched too. */
  whole(code: string): Promise<Timed>;
  /** Runs the main notebook's first cell (`x = 1`) and waits for it to finish. */
  runCell(): Promise<Timed>;
  /** Appends a code cell to the main notebook. */
  insert(): Promise<Timed>;
  /** Lists the 1,000-cell notebook's cells; `out` holds how many came back. */
  list(): Promise<Timed>;
  /** print(1)-style code through marimo-pair's execute-code.sh, where the target speaks marimo's HTTP surface. */
  scriptScratch?(code: string): Promise<Timed>;
  /** A client of its own for one of several agents at once. */
  agent(): Promise<{ scratch(code: string): Promise<Timed>; close(): Promise<void> }>;
  /** The server's process(es), for a peer: its memory is read over each one's process tree. */
  pids?(): number[];
  stop(): Promise<void>;
}

async function timed(call: () => Promise<{ ok: boolean; out: string }>): Promise<Timed> {
  const start = performance.now();
  try {
    const r = await call();
    return { ...r, ms: performance.now() - start };
  } catch (e) {
    return { ok: false, out: errorMessage(e), ms: performance.now() - start };
  }
}

/** A server in a process group of its own, its output kept in `log` for when it fails. */
function startServer(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv; log: string }): ChildProcess {
  const out = fs.openSync(opts.log, 'a');
  const child = spawn(cmd, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', out, out],
    detached: true,
  });
  fs.closeSync(out);
  return child;
}

function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return Promise.resolve();
  const gone = new Promise<void>((r) => child.once('exit', () => r()));
  process.kill(-child.pid, 'SIGTERM');
  const kill = setTimeout(() => child.pid && process.kill(-child.pid, 'SIGKILL'), 5_000);
  return gone.finally(() => clearTimeout(kill));
}

const TAKEN = 'address already in use';
const logSince = (log: string, from: number) => fs.readFileSync(log, 'utf8').slice(from);

/** Polls `url` until it answers below 500, or the server exits or finds its port taken; throws with the log's tail. */
async function waitUp(child: ChildProcess, url: string, headers: Record<string, string>, log: string, from: number) {
  const start = Date.now();
  while (Date.now() - start < 90_000 && child.exitCode === null && !logSince(log, from).includes(TAKEN)) {
    const r = await fetch(url, { headers }).catch(() => undefined);
    if (r && r.status < 500) return;
    await sleep(250);
  }
  const tail = logSince(log, from).split('\n').slice(-15).join('\n');
  throw new Error(`${url} did not come up (exit ${child.exitCode}):\n${tail}`);
}

/**
 * Starts a server on a free port, and again on another when something took that port between
 * asking and binding (Jupyter's kernels pick ports too).
 */
async function startOnFreePort(
  start: (port: number) => ChildProcess,
  probe: (port: number) => string,
  headers: Record<string, string>,
  log: string,
): Promise<{ child: ChildProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const from = fs.existsSync(log) ? fs.statSync(log).size : 0;
    const child = start(port);
    try {
      await waitUp(child, probe(port), headers, log, from);
      return { child, port };
    } catch (e) {
      await stopGroup(child);
      if (attempt === 3 || !logSince(log, from).includes(TAKEN)) throw e;
    }
  }
}

/** Runs code in the notebook `file`'s scratchpad with marimo-pair's execute-code.sh, as an agent would. */
export function executeCodeSh(scripts: string, url: string, token: string | null, file: string) {
  return (code: string) =>
    timed(
      () =>
        new Promise<{ ok: boolean; out: string }>((resolve) => {
          const child = spawn(path.join(scripts, 'execute-code.sh'), ['--url', url, '--file', file, '-c', code], {
            env: { ...process.env, MARIMO_TOKEN: token ?? '' },
          });
          let out = '';
          child.stdout.on('data', (b: Buffer) => (out += b.toString()));
          child.stderr.on('data', (b: Buffer) => (out += b.toString()));
          child.on('exit', (status) => resolve({ ok: status === 0, out }));
        }),
    );
}

// ---- the bridge ---------------------------------------------------------------------------

export interface BridgeSessions {
  url: string;
  token: string | null;
  main: string;
  list: string;
  /** The main notebook's path, and marimo-pair's scripts folder, for the execute-code.sh row. */
  mainPath: string;
  scripts?: string;
}

/**
 * Where a capped scratchpad answer's stderr says the whole output is (src/server/execute.ts's
 * note); undefined when it names none, or only a part of it.
 */
export function wholeOutputUrl(stderr: string): string | undefined {
  return /the whole output \(\d+ characters\) is at (http:\/\/\S+) for/.exec(stderr)?.[1];
}

export function bridgeTarget(name: string, b: BridgeSessions): PeerTarget {
  const client = new BenchClient(b.url, b.token);
  const scratchOn = (c: BenchClient) => (code: string) =>
    timed(async () => {
      const r = await c.execute(b.main, code);
      return execAnswer(r);
    });
  const q = (sid: string) => `?notebook=${encodeURIComponent(sid)}`;
  let first: string | undefined;
  return {
    name,
    scratch: scratchOn(client),
    // The stream carries the head and tail of a long output; the whole is one GET away.
    whole: (code) =>
      timed(async () => {
        const r = await client.execute(b.main, code);
        if (r.error || r.done?.success !== true) return { ok: false, out: r.error ?? r.stderr };
        const at = wholeOutputUrl(r.stderr);
        if (!at) return { ok: true, out: r.stdout };
        const got = await client.request('GET', new URL(at).pathname);
        return { ok: got.status === 200, out: got.text };
      }),
    scriptScratch: b.scripts ? executeCodeSh(b.scripts, b.url, b.token, b.mainPath) : undefined,
    runCell: () =>
      timed(async () => {
        first ??= (JSON.parse((await client.request('GET', `/notebooks/cells${q(b.main)}`)).text) as { cells: { id: string }[] })
          .cells[0]!.id;
        const r = await client.request('POST', `/notebooks/cells/${encodeURIComponent(first)}/run`, {
          notebook: b.main,
          wait: true,
        });
        return { ok: r.status === 200 && (JSON.parse(r.text) as { success?: boolean }).success === true, out: r.text };
      }),
    insert: () =>
      timed(async () => {
        const r = await client.request('POST', '/notebooks/cells', { notebook: b.main, code: 'pass' });
        return { ok: r.status === 201, out: r.text };
      }),
    list: () =>
      timed(async () => {
        const r = await client.request('GET', `/notebooks/cells${q(b.list)}`);
        return { ok: r.status === 200, out: String((JSON.parse(r.text) as { cells?: unknown[] }).cells?.length ?? r.text) };
      }),
    agent: async () => {
      const c = new BenchClient(b.url, b.token);
      return { scratch: scratchOn(c), close: () => c.close() };
    },
    stop: () => client.close(),
  };
}

// ---- marimo edit ---------------------------------------------------------------------------

const CODE_MODE = 'import marimo._code_mode as cm\nasync with cm.get_context() as ctx:\n';

/**
 * `marimo edit --headless` on the folder holding main.py and list.py. A session exists only
 * while a front end is connected, so each notebook gets a WebSocket held open for the run, as
 * the browser tab a marimo-pair user has open, under a session id chosen here. The bench's
 * client speaks to it as to the bridge: `POST /api/kernel/execute` for the scratchpad, and
 * cell operations as marimo-pair makes them, `marimo._code_mode` code sent the same way.
 * (Not the conformance suite's launcher: it runs every cell on open and gives a session 60 s,
 * which the 1,000-cell notebook overruns on a busy machine.)
 */
export async function marimoTarget(dir: string, scripts: string | undefined, marimo: string): Promise<PeerTarget> {
  const token = `bench-${randomHex(8)}`;
  const log = path.join(dir, 'marimo.log');
  const { child: server, port } = await startOnFreePort(
    (p) =>
      startServer(
        marimo,
        ['edit', '--headless', '--host', '127.0.0.1', '--port', String(p), '--token-password', token, '--skip-update-check', dir],
        { cwd: dir, log },
      ),
    (p) => `http://127.0.0.1:${p}/health`,
    {},
    log,
  );
  const url = `http://127.0.0.1:${port}`;
  const session = (file: string) => `s_${path.parse(file).name}`;
  const sockets: WebSocket[] = [];
  try {
    for (const file of ['main.py', 'list.py']) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/ws?session_id=${session(file)}&file=${file}&access_token=${token}`);
      sockets.push(ws);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no kernel-ready from marimo for ${file} in 90 s`)), 90_000);
        ws.onmessage = (e) => String(e.data).includes('"kernel-ready"') && (clearTimeout(timer), resolve());
        ws.onclose = (e) => reject(new Error(`marimo closed the session socket for ${file}: ${e.code} ${e.reason}`));
      });
    }
  } catch (e) {
    await stopGroup(server);
    throw e;
  }
  const client = new BenchClient(url, token);
  const execOn = (c: BenchClient, file: string) => (code: string) =>
    timed(async () => {
      const r = await c.execute(session(file), code);
      return execAnswer(r);
    });
  const scratch = execOn(client, 'main.py');
  return {
    name: 'marimo edit',
    scratch,
    whole: scratch,
    scriptScratch: scripts ? executeCodeSh(scripts, url, token, path.join(dir, 'main.py')) : undefined,
    runCell: () => scratch(`${CODE_MODE}    ctx.run_cell(ctx.cells[0].id)`),
    insert: () => scratch(`${CODE_MODE}    ctx.create_cell("pass")`),
    list: async () => {
      const r = await execOn(client, 'list.py')(`${CODE_MODE}    cells = [(c.id, c.code) for c in ctx.cells]\nprint(len(cells))`);
      return { ...r, out: r.out.trim() };
    },
    agent: async () => {
      const c = new BenchClient(url, token);
      return { scratch: execOn(c, 'main.py'), close: () => c.close() };
    },
    pids: () => [server.pid!],
    stop: async () => {
      await client.close();
      for (const ws of sockets) ws.close();
      await stopGroup(server);
    },
  };
}

// ---- Jupyter Server + jupyter-mcp-server over the MCP TypeScript SDK ----------------------

interface ToolResult {
  isError?: boolean;
  content?: { type: string; text?: string }[];
}

/**
 * Jupyter Server (ipykernel) on the folder holding main.ipynb and list.ipynb, and
 * jupyter-mcp-server's streamable-HTTP transport before it, enrolled on main.ipynb.
 */
export async function jupyterMcpTarget(dir: string, bin: string): Promise<PeerTarget> {
  const [jtoken, mtoken] = [`j-${randomHex(8)}`, `m-${randomHex(8)}`];
  const log = path.join(dir, 'jupyter.log');
  const mlog = path.join(dir, 'jupyter-mcp.log');
  const root = process.getuid?.() === 0 ? ['--allow-root'] : [];
  const server = (port: number) =>
    startServer(
      path.join(bin, 'jupyter'),
      [
        'server',
        ...root,
        '--no-browser',
        '--ServerApp.ip=127.0.0.1',
        `--ServerApp.port=${port}`,
        '--ServerApp.port_retries=0', // a taken port fails here, rather than moving the server to a port unknown to us
        `--IdentityProvider.token=${jtoken}`,
        `--ServerApp.root_dir=${dir}`,
      ],
      { cwd: dir, log },
    );
  const { child: jupyter, port: jport } = await startOnFreePort(
    server,
    (p) => `http://127.0.0.1:${p}/api/status`,
    { authorization: `token ${jtoken}` },
    log,
  );
  const jurl = `http://127.0.0.1:${jport}`;
  let mcp: { child: ChildProcess; port: number } | undefined;
  const clients: McpClient[] = [];
  const stop = async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    if (mcp) await stopGroup(mcp.child);
    await stopGroup(jupyter);
  };
  const connect = async () => {
    const c = new McpClient({ name: 'agent-bridge-bench', version: '1' });
    await c.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${mcp!.port}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${mtoken}` } },
      }),
    );
    clients.push(c);
    return c;
  };
  let client: McpClient;
  try {
    const env = { PATH: `${bin}:${process.env.PATH}`, JUPYTER_TOKEN: jtoken, MCP_TOKEN: mtoken };
    mcp = await startOnFreePort(
      (p) =>
        startServer(
          path.join(bin, 'jupyter-mcp-server'),
          ['start', '--transport', 'streamable-http', '--port', String(p), '--jupyter-url', jurl, '--document-id', 'main.ipynb'],
          { cwd: dir, log: mlog, env },
        ),
      (p) => `http://127.0.0.1:${p}/mcp`,
      { authorization: `Bearer ${mtoken}` },
      mlog,
    );
    client = await connect();
    // The listing reads list.ipynb by name; then main.ipynb (enrolled as "default") is active again for cell calls.
    for (const args of [
      { notebook_name: 'list', notebook_path: 'list.ipynb' },
      { notebook_name: 'default', notebook_path: 'main.ipynb' },
    ]) {
      const r = (await client.callTool({ name: 'use_notebook', arguments: args })) as ToolResult;
      if (r.isError) throw new Error(`use_notebook ${JSON.stringify(args)}: ${text(r)}`);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const call = (c: McpClient, name: string, args: Record<string, unknown>) =>
    timed(async () => {
      const r = (await c.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as ToolResult;
      return { ok: !r.isError, out: text(r) };
    });
  const scratchOn = (c: McpClient) => (code: string) => call(c, 'execute_code', { code, timeout: 60 });
  return {
    name: 'Jupyter Server + jupyter-mcp-server',
    scratch: scratchOn(client),
    whole: scratchOn(client),
    runCell: () => call(client, 'execute_cell', { cell_index: 0 }),
    insert: () => call(client, 'insert_cell', { cell_index: -1, cell_type: 'code', cell_source: 'pass' }),
    list: async () => {
      const r = await call(client, 'read_notebook', { notebook_name: 'list', limit: 0 });
      // One line per cell after the header lines: count the rows that start with a cell index.
      return { ...r, out: String(r.out.split('\n').filter((l) => /^\d+\t/.test(l)).length) };
    },
    agent: async () => {
      const c = await connect();
      return { scratch: scratchOn(c), close: () => c.close() };
    },
    pids: () => [jupyter.pid!, mcp!.child.pid!],
    stop,
  };
}

const text = (r: ToolResult) => (r.content ?? []).map((c) => c.text ?? '').join('');
