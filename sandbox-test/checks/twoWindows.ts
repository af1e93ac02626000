/**
 * Two VS Code windows at once, each with its own bridge: a second browser page on the same
 * code-server opens another folder, as a person opens a second window; its extension host starts
 * a second bridge with its own port and token, both listed in marimo's registry. marimo-pair's
 * real scripts must find both and reach the right kernel; closing the second window (its
 * extension host exits after code-server's reconnection grace time) must take only its entries.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { deepEq, eq, includes, ok, show } from '../assert';
import { BridgeClient } from '../http';
import { REPO_ROOT } from '../vscode';
import { type BridgeAdvert, checkRun, findBridge, skipped, callerEnv, suiteState } from './context';
import { runScript, scriptsDir } from './scripts';

const NAMES = [
  'two windows: discover-servers.sh lists both bridges',
  "two windows: execute-code.sh --url/--file reaches each window's own kernel",
  "two windows: the tokens differ and each bridge refuses the other's",
  'two windows: closing one removes only its registry entry; the other keeps working',
] as const;

export function twoWindowChecks(): void {
  const dir = scriptsDir();
  if (!dir || !fs.existsSync(path.join(dir, 'execute-code.sh')))
    return skipped(NAMES, dir ? `no execute-code.sh in ${dir}` : 'MARIMO_PAIR_SCRIPTS is not set');
  const discover = path.join(dir, 'discover-servers.sh');
  const execute = path.join(dir, 'execute-code.sh');
  const ctx = suiteState();
  let page2: Page | undefined;
  let second: BridgeAdvert;
  let client2: BridgeClient;
  let notebook2: string;
  let env: NodeJS.ProcessEnv;

  before('open a second window on another folder and a notebook in it', async function () {
    this.timeout(240_000);
    env = callerEnv(ctx.sandbox.dirs);
    const folder = fs.realpathSync(fs.mkdtempSync(path.join(ctx.sandbox.dirs.tmp, 'window2-')));
    notebook2 = path.join(folder, 'analysis.ipynb');
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', 'analysis.ipynb'), notebook2);
    page2 = await ctx.sandbox.page.context().newPage();
    const url = new URL(ctx.sandbox.workbenchUrl);
    url.search = `?folder=${encodeURIComponent(folder)}`;
    await page2.goto(url.toString(), { waitUntil: 'domcontentloaded', timeout: 120_000 });
    // Both extension hosts publish to the harness's discovery file: the second one's is the other pid.
    second = await findBridge(ctx.sandbox, ctx.discoveryFile, (a) => a.pid !== ctx.advert.pid, 180_000);
    client2 = new BridgeClient(second.url, second.token);
    const r = await client2.post('/notebooks/open', { path: notebook2, kernel: 'builtin' }, { timeoutMs: 60_000 });
    if (r.status !== 200) throw new Error(`opening ${notebook2} in the second window: ${r.status} ${r.text.slice(0, 300)}`);
  });

  after('close the second window', async () => {
    await page2?.close().catch(() => undefined);
  });

  const exec = (advert: BridgeAdvert, args: string[], signal: AbortSignal) =>
    runScript(execute, ['--url', advert.url, ...args], {
      env: { ...env, MARIMO_TOKEN: advert.token ?? '' },
      signal,
      timeoutMs: 60_000,
    });
  const listed = async (signal: AbortSignal) => {
    const r = await runScript(discover, [], { env, signal, timeoutMs: 60_000 });
    eq(r.code, 0, `discover-servers.sh exit code (stderr ${show(r.stderr)})`);
    return (JSON.parse(r.stdout) as { url: string | null }[]).map((e) => e.url);
  };

  it(NAMES[0], async () => {
    const { signal } = checkRun();
    const urls = await listed(signal);
    ok(
      urls.includes(ctx.advert.url) && urls.includes(second.url),
      `listed ${show(urls)}, want ${ctx.advert.url} and ${second.url}`,
    );
    ok(second.port !== ctx.advert.port, 'both bridges on one port');
  });

  it(NAMES[1], async () => {
    const { signal } = checkRun();
    // A mark left in the second window's kernel is not in the first's.
    const set = await exec(second, ['--file', notebook2, '-c', 'import sys\nsys.window_mark = "second"'], signal);
    eq(set.code, 0, `setting the mark in window 2 (stderr ${show(set.stderr)})`);
    const read = 'import sys\nprint(getattr(sys, "window_mark", "none"))';
    const two = await exec(second, ['--file', notebook2, '-c', read], signal);
    // The script prints a line for `done`'s (empty) output after what the code printed.
    eq(two.stdout, 'second\n\n', 'window 2 kernel');
    const one = await exec(ctx.advert, ['--file', ctx.analysis.path, '-c', read], signal);
    eq(one.stdout, 'none\n\n', 'window 1 kernel');
    // Each bridge knows only its own window's notebooks.
    const wrong = await exec(ctx.advert, ['--file', notebook2, '-c', 'print(1)'], signal);
    eq(wrong.code, 1, "window 2's notebook through window 1's bridge: exit code");
    includes(wrong.stderr, 'No active session matches', "window 2's notebook through window 1's bridge");
  });

  it(NAMES[2], async () => {
    const { signal } = checkRun();
    ok(second.token && ctx.advert.token && second.token !== ctx.advert.token, 'the two windows have the same token');
    eq((await client2.get('/api/sessions', { token: ctx.advert.token, signal })).status, 401, "window 1's token on window 2");
    eq((await ctx.client.get('/api/sessions', { token: second.token, signal })).status, 401, "window 2's token on window 1");
    eq((await client2.get('/api/sessions', { signal })).status, 200, "window 2's own token");
  });

  it(NAMES[3], async function () {
    this.timeout(120_000);
    const { signal } = checkRun();
    const entry2 = path.join(ctx.registryDir, `127.0.0.1_${second.port}.json`);
    ok(fs.existsSync(entry2), `no registry entry for window 2 at ${entry2}`);
    await page2!.close();
    page2 = undefined;
    await ctx.sandbox.waitFor(`window 2's registry entry ${entry2} to go`, () => !fs.existsSync(entry2), 90_000);
    ok(fs.existsSync(ctx.registryFile), `window 1's registry entry ${ctx.registryFile} went too`);
    deepEq(await listed(signal), [ctx.advert.url], 'discover-servers.sh after window 2 closed');
    const r = await exec(ctx.advert, ['--file', ctx.analysis.path, '-c', '6 * 7'], signal);
    eq(r.stdout, '42\n', `window 1 after window 2 closed (stderr ${show(r.stderr)})`);
  });
}
