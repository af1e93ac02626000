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
import { openAgentBridge } from './access';
import { screenshot } from '../screenshots';
import { checkRun, suiteState } from './context';
import { sleep } from '../../src/core/sleep';
import { randomHex } from '../../src/core/ids';
import { showcase } from '../showcase';

interface Cell {
  id: string;
  index: number;
  code: string;
  version: number;
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

/** The notebook diff editor in front, once it shows `line` in a cell: its text, as the person reads it. */
export async function notebookDiffShowing(page: Page, line: string, opened: string): Promise<string> {
  // VS Code's notebook diff editor (cells side by side, as Source Control shows a notebook), not a text diff.
  const diff = page.locator('.editor-instance .notebook-text-diff-editor').first();
  await diff.waitFor({ state: 'visible', timeout: 15_000 }).catch(() => fail(`${opened} opened no notebook diff editor`));
  ok(
    !(await page.locator('.editor-instance > .monaco-diff-editor, .editor-instance > .text-diff-editor').first().isVisible()),
    `${opened} opened a text diff`,
  );
  await diff.locator('.view-lines', { hasText: line }).first().waitFor({ timeout: 10_000 });
  // VS Code renders spaces as non-breaking spaces in the editor's lines.
  return (await diff.innerText()).replace(/\u00a0/g, ' ');
}

/** Clicks the Agent Changes row of a change: its notebook diff, once it shows `line`. */
export async function openChange(page: Page, rowText: string, line: string): Promise<string> {
  const row = (await reviewRows(page)).filter({ hasText: rowText }).first();
  await row.waitFor({ state: 'visible', timeout: 10_000 }).catch(() => fail(`no "${rowText}" row in Agent Changes`));
  await row.click({ timeout: 5_000 });
  return notebookDiffShowing(page, line, `clicking "${rowText}"`);
}

/** The breadcrumbs above the editor in front. */
async function breadcrumbs(page: Page): Promise<string> {
  return (await page.locator('.editor-group-container.active .breadcrumbs-control').first().innerText()).replace(/\s+/g, ' ');
}

/** Deletes cells (not as an agent whose change a check reads), leaving the notebook as the other checks expect it. */
async function removeCells(client: BridgeClient, notebook: string, ids: readonly string[], signal: AbortSignal): Promise<void> {
  const r = await client.post(
    '/notebooks/edits',
    { notebook, ops: ids.map((ref) => ({ op: 'delete', ref, force: true })) },
    { signal },
  );
  eq(r.status, 200, `cleanup (${show(r.text, 200)})`);
}

/** The `review` suite's checks. */
export function reviewChecks(): void {
  const ctx = suiteState();
  const tag = randomHex(3);

  /** An agent of this check's: its name, and the header that gives it. */
  const agentNamed = (name: string) => {
    const agent = `review-${name}-${tag}`;
    return { agent, headers: { 'x-agent-bridge-client': agent } };
  };

  it("review: an agent edits three cells, the person types in one; the change opens in VS Code's notebook diff (the agent's side as it left it, the before side out of agents' reach); Revert (clicked in Agent Changes) restores the other two and keeps the typing", async () => {
    const { signal, note } = checkRun();
    const page = ctx.sandbox.page;
    const sid = ctx.analysis.session.id;
    const { agent, headers } = agentNamed('agent');
    const originals = [0, 1, 2].map((i) => `kept_${tag}_${i} = ${i}`);
    const setup = await ctx.client.post(
      '/notebooks/edits',
      { notebook: sid, ops: originals.map((code, i) => ({ op: 'create', index: i, code })) },
      { signal, headers: { 'x-agent-bridge-client': `review-setup-${tag}` } },
    );
    eq(setup.status, 200, `creating three cells (${show(setup.text, 300)})`);
    const made = (await cellsOf(ctx.client, sid, signal)).filter((c) => c.code.startsWith(`kept_${tag}_`));
    eq(made.length, 3, 'cells made');
    const changed = originals.map((code) => code.replace('kept_', 'agent_'));
    const batch = await ctx.client.post(
      '/notebooks/edits',
      { notebook: sid, ops: made.map((c, i) => ({ op: 'edit', ref: c.id, code: changed[i], version: c.version })) },
      { signal, headers },
    );
    eq(batch.status, 200, `the agent's batch (${show(batch.text, 300)})`);

    // The person types in the middle cell, the notebook in front (shown through the bridge: with
    // many tabs open, its tab may be scrolled out of the strip).
    const typed = `  # person_${tag}`;
    const front = await ctx.client.post('/notebooks/open', { path: ctx.analysis.path }, { signal, timeoutMs: 30_000 });
    eq(front.status, 200, `showing analysis.ipynb (${show(front.text, 200)})`);
    const editor = page.locator('.notebook-editor .monaco-list-row .view-lines', { hasText: changed[1]! });
    await editor.first().waitFor({ state: 'visible', timeout: 10_000 });
    await editor.first().click({ timeout: 5_000 });
    await page.keyboard.press('End');
    await page.keyboard.type(typed);
    let middle: Cell | undefined;
    for (const end = Date.now() + 5_000; Date.now() < end; await sleep(100)) {
      middle = (await cellsOf(ctx.client, sid, signal)).find((c) => c.id === made[1]!.id);
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
    const shown = await openChange(page, `${agent} (unverified): 3 edited`, changed[0]!);
    note(`diff: ${show(shown, 800)}`);
    for (const code of [...originals, ...changed]) includes(shown, code, 'the diff');
    // The person typed in a cell since: the right side is the notebook as the agent left it.
    ok(
      !shown.includes(typed.trim()),
      `the diff shows the change as the agent made it, not the typing since (${show(shown, 300)})`,
    );
    // Its outputs' webviews settle after the cells show.
    await sleep(500);
    await page.mouse.move(900, 600);
    await screenshot(page, 'review-diff.png', note);
    await showcase(page, 'review-diff.png', note);
    // Above the diff, the right side's place: the change as the agent left it, served beside the notebook.
    const crumbs = await breadcrumbs(page);
    const served = /change (\d+)\W*as the agent left it/.exec(crumbs);
    ok(served, `the breadcrumbs name the served side (${crumbs})`);

    // An agent cannot reach the notebook the review shows as "before": an edit there would land in
    // the editor's copy the person is reading, and could hide the change.
    const listed = await ctx.client.get('/notebooks', { signal, headers });
    eq(listed.status, 200, `GET /notebooks (${show(listed.text, 200)})`);
    const sides = listed
      .json<{ notebooks: { uri: string }[] }>()
      .notebooks.filter((n) => n.uri.startsWith('agent-bridge-change:'));
    deepEq(sides, [], 'the sides of the review listed to agents');
    const beforeUri = `agent-bridge-change:/change%20${served![1]}/before/analysis.ipynb`;
    const tamper = await ctx.client.post(
      '/notebooks/edits',
      { notebook: beforeUri, ops: originals.map((_, i) => ({ op: 'edit', ref: i, code: changed[i], force: true })) },
      { signal, headers },
    );
    eq(tamper.status, 404, `an edit of the review's before notebook, named by its address (${show(tamper.text, 300)})`);

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
    const now = (await cellsOf(ctx.client, sid, signal)).filter((c) => made.some((m) => m.id === c.id));
    deepEq(
      now.map((c) => c.code),
      [originals[0], `${changed[1]}${typed}`, originals[2]],
      'the cells after Revert',
    );
    await row.waitFor({ state: 'detached', timeout: 5_000 }).catch(() => fail('the reverted change is still listed'));
    await removeCells(
      ctx.client,
      sid,
      made.map((c) => c.id),
      signal,
    );
  }).timeout(90_000);

  it('review: outputs in the notebook diff: a cell the agent changed and ran shows its new outputs beside the summary of what it showed before; a cell whose outputs did not change shows them unchanged', async () => {
    const { signal, note } = checkRun();
    const page = ctx.sandbox.page;
    const sid = ctx.analysis.session.id;
    const { agent, headers } = agentNamed('outputs');
    const setup = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: sid,
        ops: [
          { op: 'create', index: 0, name: 'printed', code: `print("shown_before_${tag}")` },
          { op: 'create', index: 1, name: 'valued', code: `value_${tag} = 7\nvalue_${tag}` },
        ],
        run: ['printed', 'valued'],
        wait: true,
        timeoutMs: 20_000,
      },
      { signal, timeoutMs: 25_000, headers: { 'x-agent-bridge-client': `review-setup-${tag}` } },
    );
    eq(setup.status, 200, `two cells made and run (${show(setup.text, 300)})`);
    const [printed, valued] = setup.json<{ cells: Cell[] }>().cells;
    const batch = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: sid,
        ops: [
          { op: 'edit', ref: printed!.id, code: `print("shown_after_${tag}")`, version: printed!.version },
          { op: 'edit', ref: valued!.id, code: `value_${tag} = 7  # unchanged output\nvalue_${tag}`, version: valued!.version },
        ],
        run: [printed!.id],
        wait: true,
        timeoutMs: 20_000,
      },
      { signal, timeoutMs: 25_000, headers },
    );
    eq(batch.status, 200, `the agent's batch and run (${show(batch.text, 300)})`);

    const shown = await openChange(page, `${agent} (unverified): 2 edited`, `shown_after_${tag}`);
    note(`diff: ${show(shown, 800)}`);
    eq(shown.match(/Outputs changed/g)?.length, 1, `cells whose outputs differ (${show(shown, 600)})`);
    ok(!shown.includes('Metadata changed'), `no cell's metadata differs (${show(shown, 600)})`);
    // Outputs are drawn in the diff's webviews (slow to come on a loaded machine): the left one has
    // the summary of what the cell showed before.
    // Only the webviews' frames: the main frame shows both texts in the cells' code from the start.
    let outputs = '';
    const drawn = () => outputs.includes(`1 output: stdout "shown_before_${tag}"`) && outputs.includes(`shown_after_${tag}`);
    for (const end = Date.now() + 30_000; !drawn() && Date.now() < end; await sleep(250)) {
      outputs = '';
      for (const frame of page.frames().filter((f) => f !== page.mainFrame()))
        outputs += await frame
          .locator('body')
          .innerText({ timeout: 1_000 })
          .catch(() => '');
    }
    await page.mouse.move(900, 600);
    await screenshot(page, 'review-outputs-diff.png', note);
    includes(outputs, `1 output: stdout "shown_before_${tag}"`, "the outputs' webviews");
    includes(outputs, 'the summary kept of its outputs before the change', "the outputs' webviews");
    includes(outputs, `shown_after_${tag}`, "the outputs' webviews");
    await removeCells(ctx.client, sid, [printed!.id, valued!.id], signal);
  }).timeout(90_000);

  it("review: a marimo notebook's change opens in VS Code's notebook diff as a marimo notebook, its right side the notebook itself while it is as the agent left it; the cell mark opens that cell's change alone, and its row in Agent Changes reverts it alone", async () => {
    const { signal, note } = checkRun();
    const page = ctx.sandbox.page;
    const { agent, headers } = agentNamed('marimo');
    // A notebook of its own (a copy of the marimo fixture); no kernel is needed to edit and review.
    const nb = path.join(ctx.workspace, `review_${tag}.py`);
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', 'other_marimo.py'), nb);
    const opened = await ctx.client.post('/notebooks/open', { path: nb }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `opening ${path.basename(nb)} (${show(opened.text, 200)})`);
    eq(opened.json<{ session: { notebookType: string } }>().session.notebookType, 'marimo-notebook', 'notebook type');
    const [first] = await cellsOf(ctx.client, nb, signal);
    const edited = `label = "reviewed_${tag}"`;
    const added = `added_${tag} = label.upper()`;
    const batch = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: nb,
        ops: [
          { op: 'edit', ref: first!.id, code: edited, version: first!.version },
          { op: 'create', code: added },
        ],
      },
      { signal, headers },
    );
    eq(batch.status, 200, `the agent's batch (${show(batch.text, 300)})`);

    const shown = await openChange(page, `${agent} (unverified): 1 added, 1 edited`, edited);
    note(`diff: ${show(shown, 600)}`);
    for (const code of [first!.code, edited, added]) includes(shown, code, 'the diff');
    const crumbs = await breadcrumbs(page);
    note(`breadcrumbs: ${crumbs}`);
    includes(crumbs, path.basename(nb), 'the right side');
    ok(!crumbs.includes('as the agent left it'), `the right side is the notebook itself, not a served copy (${crumbs})`);
    ok(/marimo notebook/i.test(crumbs), `the diff is in the marimo notebook type's own editor (${crumbs})`);
    // Its outputs' webviews settle after the cells show.
    await sleep(500);
    await page.mouse.move(900, 600);
    await screenshot(page, 'review-marimo-diff.png', note);

    // The mark of the edited cell, in the notebook: its change alone, in the whole notebook.
    const front = await ctx.client.post('/notebooks/open', { path: nb }, { signal, timeoutMs: 30_000 });
    eq(front.status, 200, `showing ${path.basename(nb)} (${show(front.text, 200)})`);
    const mark = page
      .locator('.notebook-editor .monaco-list-row', { has: page.locator('.view-lines', { hasText: edited }) })
      .locator('.cell-status-item', { hasText: `Changed by ${agent} (unverified)` });
    await mark
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail('the edited cell carries no mark'));
    await mark.first().click({ timeout: 5_000 });
    const tab = page.locator('.editor-group-container.active .tab.active', { hasText: 'cell 1 edited' }).first();
    await tab.waitFor({ state: 'visible', timeout: 15_000 }).catch(() => fail("the mark opened no diff of the cell's change"));
    const cellShown = await notebookDiffShowing(page, edited, 'the mark');
    note(`cell diff: ${show(cellShown, 600)}`);
    for (const code of [first!.code, edited]) includes(cellShown, code, "the cell's diff");
    ok(!cellShown.includes(added), `the cell's diff shows the other cell of the change as unchanged (${show(cellShown, 400)})`);

    // Revert that cell alone from its row in Agent Changes: the rest of the change stays to review.
    const change = (await reviewRows(page)).filter({ hasText: `${agent} (unverified): 1 added, 1 edited` }).first();
    if ((await change.getAttribute('aria-expanded')) !== 'true')
      await change.locator('.monaco-tl-twistie').click({ timeout: 5_000 });
    const cellRow = (await reviewRows(page)).filter({ hasText: `cell 1 edited` }).filter({ hasText: edited }).first();
    await cellRow.waitFor({ state: 'visible', timeout: 5_000 }).catch(() => fail('no "cell 1 edited" row under the change'));
    await cellRow.hover();
    await cellRow.locator(`.action-label[aria-label="Revert This Cell's Change"]`).click({ timeout: 5_000 });
    await page
      .locator('.notification-toast', { hasText: 'Reverted 1 cell' })
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail('no "Reverted 1 cell" notification'));
    deepEq(
      (await cellsOf(ctx.client, nb, signal)).map((c) => c.code),
      [first!.code, added],
      'the cells after reverting the edited one alone',
    );
    const rest = (await reviewRows(page)).filter({ hasText: `${agent} (unverified): 1 added` }).first();
    await rest
      .waitFor({ state: 'visible', timeout: 5_000 })
      .catch(() => fail('the rest of the change ("1 added") is not listed'));
  }).timeout(90_000);

  it("review: an agent's POST /notebooks/undo of its own batch leaves the saved file byte for byte as it was; a second undo after the person's edit is a 409 naming the cell", async () => {
    const { signal } = checkRun();
    // A notebook of its own (a copy of other.ipynb), so no other check's runs or saves meet it.
    const nb = path.join(ctx.workspace, `undo-${tag}.ipynb`);
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', 'other.ipynb'), nb);
    const opened = await ctx.client.post('/notebooks/open', { path: nb }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `opening ${path.basename(nb)} (${show(opened.text, 200)})`);
    const named = { 'x-agent-bridge-client': `undo-agent-${tag}` };
    const save = async (what: string) => {
      const r = await ctx.client.post('/notebooks/save', { notebook: nb }, { signal });
      eq(r.status, 200, `save ${what} (${show(r.text, 200)})`);
    };
    await save('before');
    const original = fs.readFileSync(nb);
    const cells = await cellsOf(ctx.client, nb, signal);
    ok(cells.length >= 2, `other.ipynb has ${cells.length} cells`);
    const first = cells[0]!;
    const batch = await ctx.client.post(
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
    const undo = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(undo.status, 200, `POST /notebooks/undo (${show(undo.text, 300)})`);
    deepEq(undo.json<{ skipped: unknown[] }>().skipped, [], 'cells skipped by the undo');
    await save('after the undo');
    const restored = fs.readFileSync(nb);
    if (!restored.equals(original))
      fail(`the file after undo differs: ${show(restored.toString('utf8'), 600)} vs ${show(original.toString('utf8'), 600)}`);

    // A change someone edited since is refused whole, naming the cell.
    const again = await ctx.client.post(
      '/notebooks/edits',
      { notebook: nb, ops: [{ op: 'edit', ref: first.id, code: `${first.code}\nagent_again = 1`, force: true }] },
      { signal, headers },
    );
    eq(again.status, 200, `second batch (${show(again.text, 200)})`);
    const later = await ctx.client.request({
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
    const refused = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(refused.status, 409, `undo over later work (${show(refused.text, 300)})`);
    const detail = refused.json<{ detail: string }>().detail;
    includes(detail, first.id, 'the 409 names the cell');
    includes(detail, `other-agent-${tag}`, 'the 409 names who changed it');
    // Put it back as it was for the checks after this one.
    const back = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers: other });
    eq(back.status, 200, `the other agent's undo (${show(back.text, 200)})`);
    const mine = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers });
    eq(mine.status, 200, `the first agent's undo once the cell is as it left it (${show(mine.text, 200)})`);
    await save('at the end');
    ok(fs.readFileSync(nb).equals(original), 'the file after both undos is as it was');
  }).timeout(60_000);
}
