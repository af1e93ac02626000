/**
 * Keep or revert what an agent changed, end to end: an agent's batch over HTTP, the person typing
 * in one of its cells in the workbench (Chromium keyboard), the "Agent Changes" view read and
 * clicked as the person would (its diff opened, Revert clicked), and an agent undoing its own
 * batch with the saved file compared byte for byte. Screenshots of the review list and of the
 * diff go to sandbox-results/ (look at them).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { deepEq, eq, fail, includes, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { REPO_ROOT } from '../vscode';
import { openAgentBridge, RESULTS_DIR } from './access';
import { type CheckContext, checkRun, context } from './context';
import { sleep } from '../../src/core/sleep';
import { randomHex } from '../../src/core/ids';

interface Cell {
  id: string;
  index: number;
  code: string;
  version: number;
}

async function screenshot(page: Page, name: string, note: (m: string) => void): Promise<string> {
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, name);
  await page.screenshot({ path: file });
  note(`screenshot ${path.relative(REPO_ROOT, file)}`);
  return file;
}

async function cellsOf(client: BridgeClient, notebook: string, signal: AbortSignal): Promise<Cell[]> {
  const r = await client.get(`/notebooks/cells?notebook=${encodeURIComponent(notebook)}`, { signal });
  eq(r.status, 200, `GET /notebooks/cells (${show(r.text, 200)})`);
  return r.json<{ cells: Cell[] }>().cells;
}

/** The "Agent Changes" view's rows, its container opened in the sidebar. */
export async function reviewRows(page: Page) {
  const pane = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Agent Changes' }) });
  // A second click on the activity bar icon would close the side bar again.
  if (!(await pane.first().isVisible())) await openAgentBridge(page);
  const header = pane.first().locator('.pane-header').first();
  if ((await header.getAttribute('aria-expanded')) === 'false') await header.click({ timeout: 5_000 });
  return pane.first().locator('.monaco-list-row');
}

/** The `review` suite's checks. */
export function reviewChecks(): void {
  let ctx: CheckContext;
  let client: BridgeClient;
  before(() => {
    ctx = context();
    ({ client } = ctx);
  });
  const tag = randomHex(3);

  it('review: an agent edits three cells, the person types in one, Revert (clicked in Agent Changes) restores the other two and keeps the typing; the diff shows before and after', async () => {
    const { signal, note } = checkRun();
    const page = ctx.sandbox.page;
    const sid = ctx.analysis.session.id;
    const agent = `review-agent-${tag}`;
    const headers = { 'x-agent-bridge-client': agent };
    const originals = [0, 1, 2].map((i) => `kept_${tag}_${i} = ${i}`);
    const setup = await client.post(
      '/notebooks/edits',
      { notebook: sid, ops: originals.map((code, i) => ({ op: 'create', index: i, code })) },
      { signal, headers: { 'x-agent-bridge-client': `review-setup-${tag}` } },
    );
    eq(setup.status, 200, `creating three cells (${show(setup.text, 300)})`);
    const made = (await cellsOf(client, sid, signal)).filter((c) => c.code.startsWith(`kept_${tag}_`));
    eq(made.length, 3, 'cells made');
    const changed = originals.map((code) => code.replace('kept_', 'agent_'));
    const batch = await client.post(
      '/notebooks/edits',
      { notebook: sid, ops: made.map((c, i) => ({ op: 'edit', ref: c.id, code: changed[i], version: c.version })) },
      { signal, headers },
    );
    eq(batch.status, 200, `the agent's batch (${show(batch.text, 300)})`);

    // The person types in the middle cell, the notebook in front (shown through the bridge: with
    // many tabs open, its tab may be scrolled out of the strip).
    const typed = `  # person_${tag}`;
    const front = await client.post('/notebooks/open', { path: ctx.analysis.path }, { signal, timeoutMs: 30_000 });
    eq(front.status, 200, `showing analysis.ipynb (${show(front.text, 200)})`);
    const editor = page.locator('.notebook-editor .monaco-list-row .view-lines', { hasText: changed[1]! });
    await editor.first().waitFor({ state: 'visible', timeout: 10_000 });
    await editor.first().click({ timeout: 5_000 });
    await page.keyboard.press('End');
    await page.keyboard.type(typed);
    let middle: Cell | undefined;
    for (const end = Date.now() + 5_000; Date.now() < end; await sleep(100)) {
      middle = (await cellsOf(client, sid, signal)).find((c) => c.id === made[1]!.id);
      if (middle?.code.endsWith(typed)) break;
    }
    eq(middle?.code, `${changed[1]}${typed}`, 'the typing reached the bridge');

    // The review list shows the agent's change; its row opens the diff.
    const rows = await reviewRows(page);
    const row = rows.filter({ hasText: `${agent} (unverified): 3 edited` }).first();
    await row
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail(`no "${agent} (unverified): 3 edited" row in Agent Changes`));
    note(`review rows: ${show(await rows.allInnerTexts(), 400)}`);
    await page.mouse.move(900, 600);
    await screenshot(page, 'review-list.png', note);
    await row.click({ timeout: 5_000 });
    const diff = page.locator('.monaco-diff-editor').first();
    await diff.waitFor({ state: 'visible', timeout: 10_000 }).catch(() => fail('clicking the row opened no diff editor'));
    // Side by side or inline (a narrow window): the diff editor shows both texts either way.
    await diff.locator('.view-lines', { hasText: changed[0]! }).first().waitFor({ timeout: 10_000 });
    // VS Code renders spaces as non-breaking spaces in the editor's lines.
    const shown = (await diff.innerText()).replace(/\u00a0/g, ' ');
    note(`diff: ${show(shown, 600)}`);
    for (const code of [...originals, ...changed]) includes(shown, code, 'the diff');
    includes(shown, 'edited · was cell', 'the diff, before: the kind of change and the place');
    includes(shown, 'edited · now cell', 'the diff, after');
    await sleep(500);
    await screenshot(page, 'review-diff.png', note);

    // Revert, clicked on the row's inline action.
    await row.hover();
    await row.locator('.action-label[aria-label="Revert Agent Change"]').click({ timeout: 5_000 });
    const toast = page.locator('.notification-toast', { hasText: 'Reverted 2 cells' });
    await toast
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail('no "Reverted 2 cells" notification'));
    includes(await toast.first().innerText(), made[1]!.id, 'the notification names the cell left alone');
    await screenshot(page, 'review-reverted.png', note);
    const now = (await cellsOf(client, sid, signal)).filter((c) => made.some((m) => m.id === c.id));
    deepEq(
      now.map((c) => c.code),
      [originals[0], `${changed[1]}${typed}`, originals[2]],
      'the cells after Revert',
    );
    await row.waitFor({ state: 'detached', timeout: 5_000 }).catch(() => fail('the reverted change is still listed'));
    // Leave the notebook as the other checks expect it.
    const cleanup = await client.post(
      '/notebooks/edits',
      { notebook: sid, ops: made.map((c) => ({ op: 'delete', ref: c.id, force: true })) },
      { signal },
    );
    eq(cleanup.status, 200, `cleanup (${show(cleanup.text, 200)})`);
  }).timeout(90_000);

  it("review: an agent's POST /notebooks/undo of its own batch leaves the saved file byte for byte as it was; a second undo after the person's edit is a 409 naming the cell", async () => {
    const { signal } = checkRun();
    // A notebook of its own (a copy of other.ipynb), so no other check's runs or saves meet it.
    const nb = path.join(ctx.workspace, `undo-${tag}.ipynb`);
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', 'other.ipynb'), nb);
    const opened = await client.post('/notebooks/open', { path: nb }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `opening ${path.basename(nb)} (${show(opened.text, 200)})`);
    const named = { 'x-agent-bridge-client': `undo-agent-${tag}` };
    const save = async (what: string) => {
      const r = await client.post('/notebooks/save', { notebook: nb }, { signal });
      eq(r.status, 200, `save ${what} (${show(r.text, 200)})`);
    };
    await save('before');
    const original = fs.readFileSync(nb);
    const cells = await cellsOf(client, nb, signal);
    ok(cells.length >= 2, `other.ipynb has ${cells.length} cells`);
    const first = cells[0]!;
    const batch = await client.post(
      '/notebooks/edits',
      {
        notebook: nb,
        ops: [
          { op: 'edit', ref: first.id, code: `${first.code}\nundo_me = 1`, version: first.version },
          { op: 'create', index: 1, code: 'also_undo = 2' },
          { op: 'move', ref: cells[cells.length - 1]!.id, to: 0 },
        ],
      },
      { signal, headers: named },
    );
    eq(batch.status, 200, `the batch (${show(batch.text, 300)})`);
    // The agent keeps the credential its first write was answered with: its changes are its own through it.
    const headers = { ...named, 'x-agent-bridge-credential': String(batch.headers['x-agent-bridge-credential']) };
    await save('after the batch');
    ok(!fs.readFileSync(nb).equals(original), 'the batch changed the file');
    const undo = await client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(undo.status, 200, `POST /notebooks/undo (${show(undo.text, 300)})`);
    deepEq(undo.json<{ skipped: unknown[] }>().skipped, [], 'cells skipped by the undo');
    await save('after the undo');
    const restored = fs.readFileSync(nb);
    if (!restored.equals(original))
      fail(`the file after undo differs: ${show(restored.toString('utf8'), 600)} vs ${show(original.toString('utf8'), 600)}`);

    // A change someone edited since is refused whole, naming the cell.
    const again = await client.post(
      '/notebooks/edits',
      { notebook: nb, ops: [{ op: 'edit', ref: first.id, code: `${first.code}\nagent_again = 1`, force: true }] },
      { signal, headers },
    );
    eq(again.status, 200, `second batch (${show(again.text, 200)})`);
    const later = await client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${first.id}`,
      json: { notebook: nb, code: `${first.code}\nsomeone_else = 1`, force: true },
      headers: { 'x-agent-bridge-client': `other-agent-${tag}` },
      signal,
    });
    eq(later.status, 200, `another agent's edit (${show(later.text, 200)})`);
    const other = {
      'x-agent-bridge-client': `other-agent-${tag}`,
      'x-agent-bridge-credential': String(later.headers['x-agent-bridge-credential']),
    };
    const refused = await client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(refused.status, 409, `undo over later work (${show(refused.text, 300)})`);
    const detail = refused.json<{ detail: string }>().detail;
    includes(detail, first.id, 'the 409 names the cell');
    includes(detail, `other-agent-${tag}`, 'the 409 names who changed it');
    // Put it back as it was for the checks after this one.
    const back = await client.post('/notebooks/undo', { notebook: nb }, { signal, headers: other });
    eq(back.status, 200, `the other agent's undo (${show(back.text, 200)})`);
    const mine = await client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(mine.status, 200, `the first agent's undo once the cell is as it left it (${show(mine.text, 200)})`);
    await save('at the end');
    ok(fs.readFileSync(nb).equals(original), 'the file after both undos is as it was');
  }).timeout(60_000);
}
