/** Discovery: /health, marimo's server registry entry, our own discovery file, and their removal. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { deepEq, eq, fail, includes, match, ok, show } from '../assert';
import { readProc, type ProcInfo } from '../records';
import { carriesMarker, REPO_ROOT } from '../vscode';
import { type BridgeAdvert, checkRun, fileMode, findAdvertCopies, octal, readJson, suiteState } from './context';

const REGISTRY_KEYS = ['base_url', 'host', 'pid', 'port', 'server_id', 'started_at', 'version'];

/** The `discovery` suite's checks. */
export function discoveryChecks(): void {
  const ctx = suiteState();

  for (const route of ['/health', '/healthz']) {
    it(`discovery: ${route} answers "healthy" without a token`, async () => {
      const { signal } = checkRun();
      const r = await ctx.client.get(route, { token: null, signal, timeoutMs: 2000 });
      eq(r.status, 200, `${route} status`);
      match(String(r.headers['content-type']), /^application\/json/, `${route} content-type`);
      includes(r.text, '"healthy"', `${route} body`); // discover-servers.sh greps for this literal
      eq(r.json().status, 'healthy', `${route} status field`);
      eq(r.json().server, 'agent-bridge', `${route} server field`);
    });
  }

  it("discovery: registry entry has exactly marimo's keys and values", () => {
    ok(fs.existsSync(ctx.registryFile), `no registry entry at ${ctx.registryFile} (dir has: ${show(safeList(ctx.registryDir))})`);
    const text = fs.readFileSync(ctx.registryFile, 'utf8');
    const entry = readJson(ctx.registryFile);
    deepEq(Object.keys(entry).sort(), REGISTRY_KEYS, 'registry keys');
    eq(entry.server_id, `127.0.0.1:${ctx.advert.port}`, 'server_id');
    eq(entry.host, '127.0.0.1', 'host');
    eq(entry.port, ctx.advert.port, 'port');
    eq(entry.base_url, '', 'base_url');
    eq(typeof entry.pid, 'number', 'type of pid');
    eq(typeof entry.version, 'string', 'type of version');
    match(entry.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)$/, 'started_at (ISO-8601)');
    ok(!Number.isNaN(Date.parse(entry.started_at)), `started_at does not parse: ${entry.started_at}`);
    if (ctx.advert.token) ok(!text.includes(ctx.advert.token), 'the registry entry contains the token');
    ok(!/token/i.test(text), 'the registry entry mentions a token');
  });

  it('discovery: registry entry is 0600 in a 0700 directory', () => {
    eq(octal(fileMode(ctx.registryFile)), '0600', `mode of ${path.basename(ctx.registryFile)}`);
    eq(octal(fileMode(ctx.registryDir)), '0700', 'mode of the registry directory');
    const tmpLeft = safeList(ctx.registryDir).filter((n) => !n.endsWith('.json'));
    deepEq(tmpLeft, [], 'non-.json files left in the registry directory');
  });

  it('discovery: registry pid is the live extension host of this sandbox', () => {
    const entry = readJson(ctx.registryFile);
    ok(isAlive(entry.pid), `pid ${entry.pid} is not running`);
    ok(carriesMarker(entry.pid, ctx.sandbox.id), `pid ${entry.pid} is not a process of this sandbox`);
    eq(entry.pid, ctx.advert.pid, 'registry pid vs discovery-file pid');
    ok(entry.pid !== ctx.sandbox.codeServerPid, 'the pid is code-server itself, not the extension host');
  });

  it("discovery: the discovery files are written on the extension host's side (workspace extension under code-server), never in the browser", () => {
    const pkg = readJson<{ extensionKind?: string[] }>(path.join(REPO_ROOT, 'package.json'));
    deepEq(pkg.extensionKind, ['workspace'], 'extensionKind in package.json');
    // The writer: a process under code-server's server (the remote side), not under Chromium.
    const chain: ProcInfo[] = [];
    for (let info = readProc(ctx.advert.pid); info && chain.length < 20; info = readProc(info.ppid)) chain.push(info);
    ok(
      chain.some((p) => p.pid === ctx.sandbox.codeServerPid),
      `pid ${ctx.advert.pid} is not below code-server ${ctx.sandbox.codeServerPid}: ${show(chain.map((p) => p.cmdline.slice(0, 60)))}`,
    );
    includes(chain[0]?.cmdline ?? '', 'extensionHost', `the writer (pid ${ctx.advert.pid}) is an extension host`);
    ok(
      !chain.some((p) => p.cmdline.includes(ctx.sandbox.dirs.chrome)),
      `the writer runs under Chromium: ${show(chain.map((p) => p.cmdline.slice(0, 60)))}`,
    );
    // Where it wrote: the server's file system, and none of it in the browser's profile (its
    // IndexedDB and local storage would hold a web extension's files).
    ok(fs.existsSync(ctx.discoveryFile), `no discovery file at ${ctx.discoveryFile}`);
    const inBrowser = filesUnder(ctx.sandbox.dirs.chrome).filter((f) => {
      try {
        const data = fs.readFileSync(f);
        return (ctx.advert.token !== null && data.includes(ctx.advert.token)) || data.includes('"server":"agent-bridge"');
      } catch {
        return false;
      }
    });
    deepEq(inBrowser, [], "files of the browser's profile holding the advert or its token");
  });

  it('discovery: our discovery file is 0600 with url, port and token', () => {
    eq(octal(fileMode(ctx.discoveryFile)), '0600', 'mode of the discovery file');
    const a = readJson<BridgeAdvert>(ctx.discoveryFile);
    eq(a.server, 'agent-bridge', 'server');
    eq(a.host, '127.0.0.1', 'host');
    ok(Number.isInteger(a.port) && a.port > 0, `port ${show(a.port)}`);
    eq(a.url, `http://127.0.0.1:${a.port}`, 'url');
    match(a.token, /^[0-9a-f]{32,}$/, 'token (hex, at least 128 bits)');
    match(a.version, /^\d+\.\d+\.\d+/, 'version');
    ok(!Number.isNaN(Date.parse(a.startedAt)), `startedAt ${show(a.startedAt)}`);
    ok(Array.isArray(a.sessions), 'sessions is not an array');
  });

  it('discovery: discovery file lists both opened notebooks', () => {
    const a = readJson<BridgeAdvert>(ctx.discoveryFile);
    for (const nb of [ctx.analysis, ctx.other]) {
      const s = a.sessions.find((x) => x.path === nb.path);
      ok(s, `${nb.name}.ipynb (${nb.path}) missing from sessions: ${show(a.sessions.map((x) => x.path))}`);
      eq(s.id, nb.session.id, `${nb.name} session id`);
      eq(s.uri, pathToFileURL(nb.path).href, `${nb.name} uri`);
      eq(s.notebookType, 'jupyter-notebook', `${nb.name} notebookType`);
    }
  });

  it('discovery: a copy of the discovery file lives in the global storage', () => {
    const copies = findAdvertCopies(ctx);
    ok(copies.length > 0, `no JSON with "server":"agent-bridge" under ${ctx.sandbox.dirs.userData}`);
    for (const c of copies) eq(octal(fileMode(c)), '0600', `mode of ${path.relative(ctx.sandbox.root, c)}`);
  });
}

/**
 * The `after stop` suite: VS Code is stopped (every process gone, its files kept until the root
 * after-hook removes them) and nothing the bridge wrote may be left behind.
 */
export function afterStopChecks(): void {
  const ctx = suiteState();
  let copies: string[];
  before(async function () {
    this.timeout(60_000);
    copies = findAdvertCopies(ctx);
    await ctx.sandbox.halt();
  });
  it('after stop: marimo registry entry is removed', () => {
    ok(!fs.existsSync(ctx.registryFile), `${ctx.registryFile} still exists`);
    deepEq(safeList(ctx.registryDir), [], 'files left in the registry directory');
  });
  it('after stop: our discovery file is removed', () => {
    ok(!fs.existsSync(ctx.discoveryFile), `${ctx.discoveryFile} still exists`);
  });
  it('after stop: the global-storage discovery copy is removed', () => {
    if (copies.length === 0) fail('there was no global-storage copy to begin with');
    const left = copies.filter((c) => fs.existsSync(c));
    deepEq(
      left.map((c) => path.relative(ctx.sandbox.root, c)),
      [],
      'copies left',
    );
  });
}

function safeList(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
}

function isAlive(pid: unknown): boolean {
  if (typeof pid !== 'number') return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every file under a folder (the browser's profile: a few hundred files). */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}
