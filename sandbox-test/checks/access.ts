/**
 * The person's side of agent access, driven through the workbench as the person would: the access
 * mode picked from the status bar, an `ask` notification answered with a click, the activity
 * view's rows read from the DOM, and a marked cell's status bar item. Screenshots of the view, a
 * marked cell and the ask prompt go to sandbox-results/ (what the person sees; look at them).
 */
import type { Page } from 'playwright-core';
import { eq, fail, includes, ok, show } from '../assert';
import { checkRun, suiteState } from './context';
import { screenshot } from '../screenshots';
import { sleep } from '../../src/core/sleep';

const AGENT = 'harness-agent';
const headers = { 'x-agent-bridge-client': AGENT };

/** Opens the Agent Bridge side bar from the activity bar (its icon may carry a badge over it). */
export async function openAgentBridge(page: Page): Promise<void> {
  await page
    .locator('.activitybar .action-item', { has: page.locator('a[aria-label^="Agent Bridge"]') })
    .first()
    .click({ timeout: 5_000 });
}

/** Runs a command from the palette, as the person would. */
export async function runCommand(page: Page, title: string): Promise<void> {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.type(title);
  await page.locator('.quick-input-widget .monaco-list-row', { hasText: title }).first().click({ timeout: 10_000 });
}

/** The person clicks the access mode in the status bar and picks `mode` from the quick pick. */
export async function pickMode(page: Page, mode: string): Promise<void> {
  await page.locator('.statusbar-item', { hasText: 'Agents:' }).first().click({ timeout: 5_000 });
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 5_000 });
  await input.fill(mode);
  await page.keyboard.press('Enter');
  // Away from the status bar, whose hover would cover the notifications.
  await page.mouse.move(600, 300);
  await page
    .locator('.statusbar-item', { hasText: `Agents: ${mode}` })
    .first()
    .waitFor({ timeout: 5_000 });
}

/** The `access` suite's checks. */
export function accessChecks(): void {
  const ctx = suiteState((c) => ({ sid: c.analysis.session.id }));

  it('access: ask mode, the person allows a run from the notification', async () => {
    const { note } = checkRun();
    await pickMode(ctx.page, 'ask');
    try {
      const run = ctx.client.execute(ctx.sid, 'print("allowed", 6 * 7)', { headers, timeoutMs: 30_000 });
      const toast = ctx.page.locator('.notification-toast', { hasText: `${AGENT} (unverified) wants a scratchpad run` });
      await toast.first().waitFor({ state: 'visible', timeout: 10_000 });
      includes(await toast.first().innerText(), 'print("allowed", 6 * 7)', 'the prompt shows the code');
      await sleep(600); // the toast slides in
      await screenshot(ctx.page, 'access-ask-prompt.png', note);
      await toast
        .first()
        .locator('.monaco-button', { hasText: /^Allow$/ })
        .click({ timeout: 5_000 });
      const result = await run.result;
      eq(result.status, 200, 'status after Allow');
      eq(result.stdout, 'allowed 42\n', 'stdout after Allow');
    } finally {
      await pickMode(ctx.page, 'full');
    }
  }).timeout(45_000);

  it('access: a marked cell carries who changed it', async () => {
    const { note, signal } = checkRun();
    const created = await ctx.client.post(
      '/notebooks/cells',
      { notebook: ctx.sid, code: `marked_by_agent = ${Date.now()}`, index: 0 },
      { headers, signal },
    );
    eq(created.status, 201, `POST /notebooks/cells (${show(created.text, 200)})`);
    await ctx.page
      .getByRole('tab', { name: /analysis\.ipynb/ })
      .first()
      .click({ timeout: 5_000 });
    const item = ctx.page.locator('.cell-statusbar-container', { hasText: `Added by ${AGENT} (unverified)` });
    await item
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail(`no cell status bar item "Added by ${AGENT} (unverified)" in the workbench`));
    includes(await item.first().innerText(), 'just now', 'the mark says how long ago');
    await screenshot(ctx.page, 'access-marked-cell.png', note);
  }).timeout(30_000);

  it('access: the activity view lists the actions, newest first', async () => {
    const { note, signal } = checkRun();
    const r = await ctx.client.run(ctx.sid, 'print("seen in the view")', { headers, signal });
    eq(r.status, 200, 'execute status');
    await openAgentBridge(ctx.page);
    const rows = ctx.page.locator('[id="workbench.view.extension.agentBridge"] .monaco-list-row');
    await rows
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail('the Agent Activity view shows no rows'));
    const texts = await rows.allInnerTexts();
    note(`rows: ${show(texts.slice(0, 4), 400)}`);
    includes(texts[0] ?? '', 'scratchpad run', 'the newest row');
    includes(texts[0] ?? '', 'print("seen in the view")', 'the newest row');
    includes(texts[0] ?? '', `${AGENT} (unverified)`, 'the newest row names the client, as a claim');
    includes(texts[0] ?? '', 'succeeded', 'the newest row shows the outcome');
    const message = await ctx.page.locator('[id="workbench.view.extension.agentBridge"] .message').first().innerText();
    includes(message, ctx.advert.url, 'the view names the server');
    includes(message, 'access: full', 'the view names the access mode');
    includes(message, AGENT, 'the view names the recent clients');
    ok(!/gave no name|unknown/.test(message), `a recent client is unnamed: ${message}`);
    // Widen the sidebar (drag the sash on its right edge) so the screenshot shows whole rows.
    const sidebar = await ctx.page.locator('.part.sidebar').boundingBox();
    const sashes = await ctx.page
      .locator('.monaco-sash.vertical')
      .evaluateAll((els) =>
        els.map((e) => e.getBoundingClientRect()).map((r) => ({ x: r.x + r.width / 2, y: r.y, h: r.height })),
      );
    const edge = sidebar && sashes.find((b) => Math.abs(b.x - (sidebar.x + sidebar.width)) < 6 && b.h > 100);
    if (edge) {
      await ctx.page.mouse.move(edge.x, edge.y + edge.h / 2);
      await ctx.page.mouse.down();
      await ctx.page.mouse.move(edge.x + 450, edge.y + edge.h / 2, { steps: 8 });
      await ctx.page.mouse.up();
      await ctx.page.mouse.move(900, 600);
    } else note('no sidebar sash found; the screenshot keeps the default width');
    await screenshot(ctx.page, 'access-view.png', note);
    // Selecting the row opens the action's code, outcome and output.
    await rows.first().click({ timeout: 5_000 });
    const detail = ctx.page.locator('.editor-instance .view-lines', { hasText: 'print("seen in the view")' });
    await detail
      .first()
      .waitFor({ state: 'visible', timeout: 10_000 })
      .catch(() => fail('selecting the row opened no editor with its code'));
    includes(await detail.first().innerText(), 'succeeded', 'the detail names the outcome');
  }).timeout(30_000);
}
