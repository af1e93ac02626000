/**
 * The last phase: a window restart, as a person reloads VS Code ("Developer: Reload Window").
 * The extension host restarts, so a new bridge comes up on a new port with a new token; the
 * old one must be gone, its discovery file and registry entry replaced. Cell ids (the notebook
 * file's nbformat ids) and versions must be the same in the new window. The Jupyter extension
 * forgets its in-memory answers too, which is how the harness meets its Deny: the person first
 * takes Agent Bridge's access away in "Jupyter: Manage Access To Jupyter Kernels" (nothing is
 * stored for it then), so after the restart Jupyter asks again, and Playwright clicks Deny; a
 * second restart shows that Jupyter stored that answer (it refuses without asking).
 *
 * It leaves the window in its new state: the context's advert, client and registry file are
 * the new bridge's afterwards, for the after-stop checks.
 */
import { setContext, suiteState } from './context';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { deepEq, eq, fail, includes, ok, show } from '../assert';
import { BridgeClient, type SseResult } from '../http';
import { processAlive } from '../../src/discovery';
import { type BridgeAdvert, checkRun, context, expectWellFramed, findBridge, readJson, skipped } from './context';
import { findExtension, type GivenExtension, JUPYTER_ID } from '../extensions';
import { screenshot } from '../screenshots';
import { bridgeLog, expectRefused, jupyterWorkbench, MANAGE, WAITING } from './jupyter';
import { notebookDiffShowing, openChange, reviewRows } from './review';
import { sleep } from '../../src/core/sleep';

const NAMES = {
  revoke:
    'reload: unchecking Agent Bridge in "Jupyter: Manage Access To Jupyter Kernels" → the next request is refused, then 403 naming the command',
  restart:
    'reload: "Developer: Reload Window" starts a new bridge (new extension host, port and token); the old one is gone, its discovery files replaced',
  ids: 'reload: cell ids and versions are the same after a window restart',
  review:
    'reload: an agent change made before the restart is still in Agent Changes after it, its notebook diff (open at the restart) restored, and Revert (clicked) takes it back',
  start: "reload: POST /notebooks/kernel/start starts jupyter.ipynb's kernel again in the new window",
  deny: 'reload: Jupyter asks again after the restart; Deny in the dialog → the waiting run fails with the refusal',
  denied:
    'reload: after Deny → 403 naming "Jupyter: Manage Access To Jupyter Kernels"; the session shows the refusal; the log says why',
  stored:
    'reload: Deny is stored: after another window restart Jupyter refuses at once, without asking; ids and versions still the same',
} as const;

const REFUSED = 'The person refused Agent Bridge access';
const RELOAD_AGENT = 'reload-agent';

interface CellView {
  id: string;
  version: number;
  code: string;
}

/** True when nothing listens on the port any more. */
function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/** A `print("ran")` stream that ended with the refusal on stderr, naming the command, unrun. */
function expectRefusedRun(r: SseResult, what: string): void {
  eq(expectWellFramed(r, what).success, false, `${what}: done.success`);
  includes(r.stderr, REFUSED, `${what}: stderr`);
  includes(r.stderr, MANAGE, `${what}: stderr names the command`);
  ok(!r.stdout.includes('ran'), `${what}: the code ran: ${show(r.stdout)}`);
}

/** The `reload` suite's checks (the Jupyter ones pending by name, with the reason, without the extension). */
export function reloadChecks(extensions: readonly GivenExtension[]): void {
  const jupyter = findExtension(extensions, JUPYTER_ID);
  const withJupyter = !('skip' in jupyter);
  const ctx = suiteState((c) => ({ ui: jupyterWorkbench(c.sandbox), jupyterPath: path.join(c.workspace, 'jupyter.ipynb') }));
  const cellsOf = async (client: BridgeClient, notebook: string, signal: AbortSignal): Promise<CellView[]> => {
    const r = await client.get(`/notebooks/cells?notebook=${encodeURIComponent(notebook)}`, { signal });
    eq(r.status, 200, `GET /notebooks/cells (${show(r.text, 300)})`);
    return r.json<{ cells: CellView[] }>().cells.map(({ id, version, code }) => ({ id, version, code }));
  };
  /** Runs a command from the command palette, as the person would. */
  const palette = async (command: string) => {
    await ctx.page.keyboard.press('F1');
    await ctx.page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
    await ctx.page.keyboard.type(command);
    await ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: command }).first().click({ timeout: 20_000 });
  };
  const startJupyter = async (signal: AbortSignal): Promise<string> => {
    const started = ctx.client.post(
      '/notebooks/kernel/start',
      { notebook: ctx.jupyterPath, kernel: 'jupyter' },
      { signal, timeoutMs: 110_000 },
    );
    await ctx.ui.pickKernel();
    const r = await started;
    eq(r.status, 200, `kernel start (${show(r.text, 400)})`);
    const body = r.json<{ session: { id: string }; kernel: string }>();
    eq(body.kernel, 'jupyter', 'kernel');
    return body.session.id;
  };
  /**
   * The session of jupyter.ipynb with access allowed: the Jupyter checks leave it so; run alone
   * (--only), this starts the kernel and clicks Allow as they do.
   */
  const allowedJupyterSession = async (signal: AbortSignal): Promise<string> => {
    const sessions = (await ctx.client.get('/api/sessions', { signal })).json<Record<string, { path: string }>>();
    const sid = Object.entries(sessions).find(([, s]) => s.path === ctx.jupyterPath)?.[0] ?? (await startJupyter(signal));
    const stream = ctx.client.execute(sid, 'print("before")', { signal, timeoutMs: 40_000 });
    if (await stream.next((e) => e.event === 'stderr' && String(e.data?.data).includes(WAITING), 3000).catch(() => undefined))
      await ctx.ui.dialogButton('Allow').click({ timeout: 10_000 });
    const r = await stream.result;
    eq(expectWellFramed(r).success, true, `a run with access allowed (stderr ${show(r.stderr)})`);
    return sid;
  };
  /**
   * Restarts the window as the person would, finds the new bridge through the discovery file,
   * checks that the old one is gone and its files replaced, and points the context at the new one.
   */
  const restartWindow = async (signal: AbortSignal, note: (m: string) => void): Promise<void> => {
    const old = ctx.advert;
    const oldRegistry = ctx.registryFile;
    await palette('Developer: Reload Window');
    const fresh = await findBridge(ctx.sandbox, ctx.discoveryFile, (a) => a.pid !== old.pid, 90_000);
    note(`old bridge ${old.url} (pid ${old.pid}), new ${fresh.url} (pid ${fresh.pid})`);
    ok(fresh.token && fresh.token !== old.token, 'the new bridge has the old token');
    const client = new BridgeClient(fresh.url, fresh.token);
    // The old extension host goes once VS Code's reconnection grace time is over.
    await ctx.sandbox.waitFor(`the old extension host (pid ${old.pid}) to exit`, () => !processAlive(old.pid), 60_000);
    if (fresh.port !== old.port) {
      ok(await refusesConnections(old.port), `the old port ${old.port} still accepts connections`);
      ok(!fs.existsSync(oldRegistry), `the old registry entry ${oldRegistry} is still there`);
    }
    // Read again once the old one is gone: its exit must not have taken the new bridge's files.
    const now = readJson<BridgeAdvert>(ctx.discoveryFile);
    eq(now.pid, fresh.pid, 'pid in the discovery file after the old host exited');
    const registryFile = path.join(ctx.registryDir, `127.0.0.1_${fresh.port}.json`);
    ok(fs.existsSync(registryFile), `no registry entry for the new bridge at ${registryFile}`);
    eq(readJson<{ pid: number }>(registryFile).pid, fresh.pid, 'pid in the new registry entry');
    const old401 = await client.get('/api/sessions', { token: old.token, signal });
    eq(old401.status, 401, 'the old token on the new bridge');
    setContext({ ...context(), advert: fresh, client, registryFile });
  };
  const refusalsLogged = () => bridgeLog(ctx).split(REFUSED).length - 1;

  // ---------------------------------------------------- (a) access taken away in Manage Access
  if (withJupyter)
    it(NAMES.revoke, async () => {
      const { signal, note } = checkRun();
      const sid = await allowedJupyterSession(signal);
      const logged = refusalsLogged();
      await palette(MANAGE);
      const row = ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Agent Bridge' }).first();
      await row.waitFor({ state: 'visible', timeout: 20_000 });
      eq(await row.getAttribute('aria-checked'), 'true', 'Agent Bridge checked in Manage Access (allowed before)');
      await row.click();
      eq(await row.getAttribute('aria-checked'), 'false', 'Agent Bridge unchecked');
      await ctx.page.keyboard.press('Enter');
      await ctx.page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: 10_000 });
      // The bridge learns of it from the next run Jupyter refuses: that one fails saying so
      // (its stream had begun), and later ones get 403.
      const first = await ctx.client.run(sid, 'print("ran")', { signal, timeoutMs: 20_000 });
      note(`first request after the change: ${first.status} ${show(first.stderr || first.raw, 400)}`);
      expectRefusedRun(first, 'the first request');
      await expectRefused(ctx.client, sid, signal);
      ok(refusalsLogged() > logged, "the bridge's log does not say that access was refused");
    }).timeout(180_000);

  // ------------------------------------------------------------------------ the window restart
  let recorded: CellView[] = [];
  it(NAMES.restart, async () => {
    const { signal, note } = checkRun();
    // A cell edited twice (version 3) and one the bridge created (its id written to the file).
    const nb = ctx.other.path;
    const cells = await cellsOf(ctx.client, nb, signal);
    const target = cells[cells.length - 1]!;
    for (const [i, code] of ['# reload 1', '# reload 2'].entries()) {
      const edit = await ctx.client.request({
        method: 'PATCH',
        path: `/notebooks/cells/${target.id}`,
        json: { notebook: nb, code: `${target.code}\n${code}`, version: target.version + i },
        signal,
      });
      eq(edit.status, 200, `edit ${i + 1} (${show(edit.text, 300)})`);
    }
    const created = await ctx.client.post(
      '/notebooks/cells',
      { notebook: nb, code: 'made_here = 1' },
      { signal, headers: { 'x-agent-bridge-client': RELOAD_AGENT } },
    );
    eq(created.status, 201, `create (${show(created.text, 300)})`);
    const saved = await ctx.client.post('/notebooks/save', { notebook: nb }, { signal });
    eq(saved.status, 200, `save (${show(saved.text, 300)})`);
    recorded = await cellsOf(ctx.client, nb, signal);
    ok(
      recorded.some((c) => c.version > 1),
      `no cell with a version above 1: ${show(recorded)}`,
    );
    const onDisk = readJson<{ cells: { id?: string }[] }>(nb).cells.map((c) => c.id);
    deepEq(
      onDisk,
      recorded.map((c) => c.id),
      'the ids in the saved file',
    );
    // The person is reading the agent's change when the window restarts.
    await openChange(ctx.page, `${RELOAD_AGENT} (unverified): 1 added`, 'made_here = 1');

    await restartWindow(signal, note);
  }).timeout(180_000);

  /** Reopens the notebook through the (new) bridge: the same ids, versions and text as before. */
  const expectSameCells = async (signal: AbortSignal, when: string) => {
    ok(recorded.length, 'no cells recorded before the restart');
    const opened = await ctx.client.post('/notebooks/open', { path: ctx.other.path }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `open (${show(opened.text, 300)})`);
    deepEq(await cellsOf(ctx.client, ctx.other.path, signal), recorded, `cells (id, version, code) ${when}`);
  };
  it(NAMES.ids, async () => {
    const { signal } = checkRun();
    await expectSameCells(signal, 'after the restart');
  }).timeout(45_000);

  it(NAMES.review, async () => {
    const { signal, note } = checkRun();
    const nb = ctx.other.path;
    // The restored editor (its tab, behind the notebook reopened since) reads its left side from
    // the new bridge, built again from the checkpoint.
    const tab = ctx.page.locator('.tabs-container .tab', { hasText: `${RELOAD_AGENT} (unverified): 1 added` }).first();
    await tab.click({ timeout: 10_000 }).catch(() => fail('the diff open at the restart has no tab after it'));
    const shown = await notebookDiffShowing(ctx.page, 'made_here = 1', 'the restored tab');
    note(`restored diff: ${show(shown, 400)}`);
    const row = (await reviewRows(ctx.page)).filter({ hasText: `${RELOAD_AGENT} (unverified): 1 added` }).first();
    await row
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail(`no "${RELOAD_AGENT} (unverified): 1 added" row in Agent Changes after the restart`));
    await ctx.page.mouse.move(900, 600);
    await screenshot(ctx.page, 'review-after-reload.png', note);
    await row.hover();
    await row.locator('.action-label[aria-label="Revert Agent Change"]').click({ timeout: 5_000 });
    let cells: CellView[] = [];
    for (const end = Date.now() + 10_000; Date.now() < end; await sleep(200)) {
      cells = await cellsOf(ctx.client, nb, signal);
      if (!cells.some((c) => c.code === 'made_here = 1')) break;
    }
    deepEq(
      cells.map((c) => c.code),
      recorded.filter((c) => c.code !== 'made_here = 1').map((c) => c.code),
      'the cells after Revert',
    );
    const saved = await ctx.client.post('/notebooks/save', { notebook: nb }, { signal });
    eq(saved.status, 200, `save (${show(saved.text, 300)})`);
    recorded = cells;
  }).timeout(45_000);

  // --------------------------------------------------------- (b) Jupyter asks again: Deny
  let sid = '';
  if (withJupyter)
    it(NAMES.start, async () => {
      const { signal } = checkRun();
      sid = await startJupyter(signal);
    }).timeout(120_000);

  let logged = 0;
  if (withJupyter)
    it(NAMES.deny, async () => {
      const { signal, note } = checkRun();
      ok(sid, 'no session from the start check');
      logged = refusalsLogged();
      const stream = ctx.client.execute(sid, 'print("ran")', { signal, timeoutMs: 60_000 });
      const line = await stream.next((e) => e.event === 'stderr' && String(e.data?.data).includes(WAITING), 20_000);
      ok(line, `no "${WAITING}" line on the stream: ${show(stream.events.map((e) => e.rawData))}`);
      await ctx.ui.dialogShown();
      await ctx.ui.notification('Agent Bridge: an agent is waiting for your permission');
      // The moment before the click, kept with the sandbox's logs (KEEP_LOGS=<dir>).
      const shot = path.join(ctx.sandbox.dirs.logs, 'reload-deny-dialog.png');
      await ctx.page.screenshot({ path: shot });
      note(`the dialog before Deny: ${path.relative(ctx.sandbox.root, shot)}`);
      await ctx.ui.dialogButton('Deny').click({ timeout: 10_000 });
      const r = await stream.result;
      expectRefusedRun(r, 'the waiting request');
    }).timeout(60_000);

  if (withJupyter)
    it(NAMES.denied, async () => {
      const { signal } = checkRun();
      ok(sid, 'no session from the start check');
      await expectRefused(ctx.client, sid, signal);
      ok(refusalsLogged() > logged, "the bridge's log does not say that access was refused");
      eq(await ctx.page.locator('.monaco-dialog-box').count(), 0, 'dialogs open (Jupyter must not ask again)');
    });

  if (withJupyter)
    it(NAMES.stored, async () => {
      const { signal, note } = checkRun();
      ok(sid, 'no session from the start check');
      await restartWindow(signal, note);
      await expectSameCells(signal, 'after a second restart');
      sid = await startJupyter(signal);
      const r = await ctx.client.run(sid, 'print("ran")', { signal, timeoutMs: 20_000 });
      expectRefusedRun(r, 'the first request');
      ok(!r.stderr.includes(WAITING), `Jupyter asked again: ${show(r.stderr)}`);
      eq(await ctx.page.locator('.monaco-dialog-box').count(), 0, 'dialogs open');
      await expectRefused(ctx.client, sid, signal);
    }).timeout(240_000);

  if (!withJupyter) skipped([NAMES.revoke, NAMES.start, NAMES.deny, NAMES.denied, NAMES.stored], jupyter.skip);
}
