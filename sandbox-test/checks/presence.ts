/**
 * Presence, end to end: agents working over HTTP show in the person's notebook (a cell status item
 * with the agent's name and verb, the agent count in the status bar and its list, rows in the
 * activity view), read from the page; the person typing in the workbench (Chromium keyboard) makes
 * an agent's write to that cell wait (409) unless forced, and the bridge's own writes are not taken
 * for their typing; `GET /notebooks/presence` lists two agents with their verbs. Screenshots go to
 * sandbox-results/ (look at them).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Locator } from 'playwright-core';
import { deepEq, eq, fail, includes, ok, show } from '../assert';
import type { HttpResult } from '../http';
import { openAgentBridge, widenSideBar } from './access';
import { screenshot } from '../screenshots';
import { checkRun, suiteState } from './context';
import { sleep } from '../../src/core/sleep';
import type { PresenceAnswer } from '../../src/core/model/presenceAnswer';

const RUNNER = 'presence-runner';
const READER = 'presence-reader';
const as = (agent: string) => ({ 'x-agent-bridge-client': agent });
const SLEEP_CELL = 'import time; time.sleep(3); print("slept 3 s")';

interface Cell {
  id: string;
  code: string;
  personEditing?: true;
}

/** The `presence` suite's checks. */
export function presenceChecks(): void {
  const ctx = suiteState();
  let sid: string;
  let cells: Cell[];
  /** The cell's row in the notebook editor (found by its text). */
  const row = (text: string): Locator =>
    ctx.page.locator('.notebook-editor .monaco-list-row', { has: ctx.page.locator('.view-lines', { hasText: text }) });
  const statusItem = (cellText: string, agent: string, verb: string) =>
    row(cellText).locator('.cell-statusbar-container .cell-status-item', { hasText: new RegExp(`${verb} · .*${agent}`, 'i') });
  const get = async (ref: string, agent: string, signal: AbortSignal): Promise<Cell> => {
    const r = await ctx.client.get(`/notebooks/cells/${ref}?notebook=${sid}`, { headers: as(agent), signal });
    eq(r.status, 200, `GET cell ${ref} as ${agent} (${show(r.text, 200)})`);
    return r.json<{ cell: Cell }>().cell;
  };
  const patch = (ref: string, agent: string, body: Record<string, unknown>, signal: AbortSignal): Promise<HttpResult> =>
    ctx.client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${ref}`,
      json: { notebook: sid, ...body },
      headers: as(agent),
      signal,
    });
  const presence = async (agent: string, signal: AbortSignal): Promise<PresenceAnswer> => {
    const r = await ctx.client.get(`/notebooks/presence?notebook=${sid}`, { headers: as(agent), signal });
    eq(r.status, 200, `GET /notebooks/presence (${show(r.text, 300)})`);
    return r.json<PresenceAnswer>();
  };
  const run = async (ref: string, agent: string, signal: AbortSignal) => {
    const r = await ctx.client.post(`/notebooks/cells/${ref}/run`, { notebook: sid }, { headers: as(agent), signal });
    eq(r.status, 202, `run ${ref} as ${agent} (${show(r.text, 200)})`);
  };
  const waitRun = async (ref: string, signal: AbortSignal) => {
    const r = await ctx.client.post(
      `/notebooks/cells/${ref}/wait`,
      { notebook: sid, timeoutMs: 20_000 },
      { signal, timeoutMs: 25_000 },
    );
    eq(r.status, 200, `waiting for ${ref} (${show(r.text, 200)})`);
  };
  const front = async () => {
    await ctx.page
      .getByRole('tab', { name: /presence\.ipynb/ })
      .first()
      .click({ timeout: 5_000 });
    await ctx.page.mouse.move(700, 400);
  };

  const toggleSecondarySideBar = async () => {
    const title = 'View: Toggle Secondary Side Bar Visibility';
    await ctx.page.keyboard.press('F1');
    await ctx.page.keyboard.type(title);
    await ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: title }).first().waitFor({ timeout: 10_000 });
    await ctx.page.keyboard.press('Enter');
  };

  before(async function () {
    this.timeout(90_000);
    const file = path.join(ctx.workspace, 'presence.ipynb');
    const source = [SLEEP_CELL, 'presence_read = 1', 'presence_typed = 1', 'presence_cursor = 1', 'import time; time.sleep(8)'];
    const nb = {
      cells: source.map((code, i) => ({
        cell_type: 'code',
        id: `p${i}`,
        metadata: {},
        execution_count: null,
        outputs: [],
        source: [code],
      })),
      metadata: { language_info: { name: 'python' } },
      nbformat: 4,
      nbformat_minor: 5,
    };
    fs.writeFileSync(file, `${JSON.stringify(nb, null, 1)}\n`);
    const r = await ctx.client.post(
      '/notebooks/open',
      { path: file, kernel: 'builtin' },
      { timeoutMs: 60_000, headers: as(RUNNER) },
    );
    eq(r.status, 200, `open presence.ipynb (${show(r.text, 300)})`);
    sid = r.json<{ session: { id: string } }>().session.id;
    // The kernel started before anything is timed (as the runner: no third agent in the notebook).
    const warm = await ctx.client.run(sid, 'None', { timeoutMs: 60_000, headers: as(RUNNER) });
    eq(warm.status, 200, 'the kernel answers');
    const listed = await ctx.client.get(`/notebooks/cells?notebook=${sid}`, { headers: as(RUNNER) });
    cells = listed.json<{ cells: Cell[] }>().cells;
    eq(cells.length, source.length, 'cells of presence.ipynb');
  });

  it('presence: while an agent runs a 3 s cell, the cell shows "running" with its name (in the page), and the mark goes when the run ends', async () => {
    const { signal, note } = checkRun();
    await front();
    // The empty secondary side bar out of the way, so the cell's status item is read whole.
    if (await ctx.page.locator('.part.auxiliarybar').isVisible()) await toggleSecondarySideBar();
    const t0 = Date.now();
    await run(cells[0]!.id, RUNNER, signal);
    const item = statusItem('time.sleep(3)', RUNNER, 'running');
    await item
      .first()
      .waitFor({ state: 'visible', timeout: 2_500 })
      .catch(() => fail(`no "Running · ${RUNNER}" status item on the cell within 2.5 s of the run`));
    note(`"running" shown ${Date.now() - t0} ms after the run was asked for: ${show(await item.first().innerText())}`);
    await screenshot(ctx.page, 'presence-running.png', note);
    const status = ctx.page.locator('.statusbar-item', { hasText: /agents? here/ });
    includes(await status.first().innerText(), '1 agent here', 'the status bar counts the agent');
    await waitRun(cells[0]!.id, signal);
    await item
      .first()
      .waitFor({ state: 'hidden', timeout: 5_000 })
      .catch(() => fail('the "running" item stayed after the run ended'));
    note(`gone ${Date.now() - t0} ms after the run was asked for`);
  }).timeout(30_000);

  it('presence: two agents working on two cells are both listed in GET /notebooks/presence with their verbs, in the page, the status bar list and the activity view', async () => {
    const { signal, note } = checkRun();
    const long = cells[4]!; // an 8 s run: long enough to look at everything while it runs
    await front();
    // The activity view beside the notebook (a suite before may have left it open: a click would close it).
    const activity = ctx.page.locator('[id="workbench.view.extension.agentBridge"]');
    const wasOpen = await activity.isVisible();
    if (!wasOpen) await openAgentBridge(ctx.page);
    // 510 px wide: whole rows in the view, whole status items in the notebook (at 1280x720).
    const width = (await ctx.page.locator('.part.sidebar').boundingBox())?.width ?? 300;
    await widenSideBar(ctx.page, 510 - width, note);
    await run(long.id, RUNNER, signal);
    await get(cells[1]!.id, READER, signal);
    const answer = await presence(READER, signal);
    note(`presence: ${show(answer, 600)}`);
    const named = (agent: string) => answer.agents.find((a) => a.name.includes(agent));
    const runner = named(RUNNER);
    const reader = named(READER);
    ok(runner, `${RUNNER} is not listed: ${show(answer.agents, 300)}`);
    ok(reader, `${READER} is not listed: ${show(answer.agents, 300)}`);
    deepEq([runner.verb, runner.cell?.id, runner.you], ['running', long.id, false], `${RUNNER}: verb, cell, you`);
    deepEq([reader.verb, reader.cell?.id, reader.you], ['reading', cells[1]!.id, true], `${READER}: verb, cell, you`);
    const running = answer.running.find((r) => r.cell?.id === long.id);
    ok(running?.for?.includes(RUNNER), `the run of ${long.id} is not listed for ${RUNNER}: ${show(answer.running)}`);
    // The person's view: both cells marked at once (the reader keeps reading: a read shows a few seconds).
    const reading = statusItem('presence_read', READER, 'reading');
    const runningItem = statusItem('time.sleep(8)', RUNNER, 'running');
    const now = ctx.page.locator('[id="workbench.view.extension.agentBridge"] .monaco-list-row', { hasText: 'Now:' });
    // Agents of earlier checks may still have rows of their own: wait for these two agents' rows.
    const bothRows = async () => {
      const rows = await now.allInnerTexts();
      return rows.some((t) => t.includes(RUNNER)) && rows.some((t) => t.includes(READER));
    };
    for (const end = Date.now() + 5_000; Date.now() < end; await sleep(300)) {
      if ((await reading.count()) && (await runningItem.count()) && (await bothRows())) break;
      await get(cells[1]!.id, READER, signal);
    }
    ok(await runningItem.count(), `no "Running · ${RUNNER}" item in the page`);
    ok(await reading.count(), `no "Reading · ${READER}" item in the page`);
    const status = ctx.page.locator('.statusbar-item', { hasText: /agents? here/ });
    includes(await status.first().innerText(), '2 agents here', 'the status bar counts both');
    // The activity view, live: a "Now:" row per agent.
    const texts = await now.allInnerTexts();
    note(`activity view: ${show(texts, 300)}`);
    ok(
      texts.some((t) => t.includes(RUNNER) && t.includes('running cell 5')),
      `no activity row of ${RUNNER} running: ${show(texts)}`,
    );
    ok(
      texts.some((t) => t.includes(READER) && t.includes('reading cell 2')),
      `no activity row of ${READER} reading: ${show(texts)}`,
    );
    await get(cells[1]!.id, READER, signal);
    await ctx.page.mouse.move(900, 500);
    await sleep(300);
    await screenshot(ctx.page, 'presence-two-agents.png', note);
    // Clicking the count lists them with their cells.
    await status.first().click({ timeout: 5_000 });
    const picks = ctx.page.locator('.quick-input-widget .monaco-list-row');
    await picks.first().waitFor({ state: 'visible', timeout: 5_000 });
    const listed = await picks.allInnerTexts();
    note(`the list: ${show(listed, 300)}`);
    ok(
      listed.some((t) => t.includes(RUNNER) && t.includes('running cell 5')),
      `the list does not show ${RUNNER} running cell 5: ${show(listed)}`,
    );
    ok(
      listed.some((t) => t.includes(READER) && /read(ing)? cell 2/.test(t)),
      `the list does not show ${READER} at cell 2: ${show(listed)}`,
    );
    await ctx.page.keyboard.press('Escape');
    if (!wasOpen) await openAgentBridge(ctx.page); // closes the side bar again
    await waitRun(long.id, signal);
  }).timeout(60_000);

  it('presence: the person types into a cell in the workbench; an agent’s PATCH within 10 s gets 409 "the person is editing this cell right now", then goes with force', async () => {
    const { signal, note } = checkRun();
    const cell = cells[2]!;
    await get(cell.id, RUNNER, signal);
    await front();
    const editor = row('presence_typed').locator('.view-lines');
    await editor.first().click({ timeout: 5_000 });
    await ctx.page.keyboard.press('End');
    await ctx.page.keyboard.type('  # the person');
    const typedAt = Date.now();
    // The agent reads what the person typed (read-before-write passes), and sees they are at it.
    let seen: Cell | undefined;
    for (const end = Date.now() + 5_000; Date.now() < end; await sleep(100)) {
      seen = await get(cell.id, RUNNER, signal);
      if (seen.code.includes('the person')) break;
    }
    if (!seen?.code.includes('the person')) fail(`the typing never reached the bridge: ${show(seen?.code)}`);
    eq(seen.personEditing, true, 'the cell view carries personEditing');
    const refused = await patch(cell.id, RUNNER, { code: 'presence_typed = "agent"' }, signal);
    const since = Date.now() - typedAt;
    note(`PATCH answered ${refused.status} ${since} ms after the last keystroke: ${show(refused.text, 400)}`);
    ok(since < 10_000, `the PATCH came ${since} ms after the keystroke, too late to test the 10 s window`);
    eq(refused.status, 409, 'PATCH while the person types');
    const body = refused.json<{ detail: string; personEditing: { id: string; secondsSinceKeystroke: number }[] }>();
    includes(body.detail, 'the person is editing this cell right now', 'the 409 detail');
    eq(body.personEditing[0]?.id, cell.id, 'the 409 names the cell');
    ok(
      body.personEditing[0]!.secondsSinceKeystroke < 10,
      `secondsSinceKeystroke ${body.personEditing[0]!.secondsSinceKeystroke}`,
    );
    eq((await get(cell.id, RUNNER, signal)).code, 'presence_typed = 1  # the person', 'nothing changed');
    const answer = await presence(RUNNER, signal);
    const person = answer.person.cells.find((c) => c.id === cell.id);
    ok(person?.editing, `GET /notebooks/presence does not show the person editing ${cell.id}: ${show(answer.person)}`);
    const forced = await patch(cell.id, RUNNER, { code: 'presence_typed = "agent"', force: true }, signal);
    eq(forced.status, 200, `PATCH with force (${show(forced.text, 300)})`);
    eq((await get(cell.id, RUNNER, signal)).code, 'presence_typed = "agent"', 'the forced write landed');
    // Force is no quiet way around the person: they are told, naming the agent and the cell.
    const told = ctx.page.locator('.notification-toast', { hasText: 'wrote over what you were typing' });
    await told
      .first()
      .waitFor({ state: 'visible', timeout: 5_000 })
      .catch(() => fail('the person was not told that an agent forced a write over their typing'));
    const text = await told.first().innerText();
    note(`the person is told: ${show(text, 300)}`);
    includes(text, `${RUNNER} (unverified)`, 'the notice names the agent');
    includes(text, 'cell 3', 'the notice names the cell');
    // Expanded, so the screenshot shows the whole notice.
    await told.first().hover();
    await told
      .first()
      .locator('.codicon-notifications-expand')
      .first()
      .click({ timeout: 2_000 })
      .catch(() => note('the notice could not be expanded; the screenshot shows its first line'));
    await screenshot(ctx.page, 'presence-forced.png', note);
    await told
      .first()
      .locator('.codicon-notifications-clear')
      .first()
      .click({ timeout: 2_000 })
      .catch(() => undefined);
  }).timeout(30_000);

  it('presence: an agent cannot pass for the person: one that calls itself "the person" is listed as an agent, adds no cell of the person, and its writes are no keystrokes', async () => {
    const { signal, note } = checkRun();
    const impostor = 'the person';
    const cell = cells[1]!;
    await get(cell.id, impostor, signal);
    const w = await patch(cell.id, impostor, { code: 'presence_read = 2' }, signal);
    eq(w.status, 200, `the impostor's write (${show(w.text, 300)})`);
    // A body that claims the person's typing is refused (strict schemas), not obeyed.
    const claimed = await patch(cell.id, impostor, { code: 'presence_read = 3', personEditing: true }, signal);
    eq(claimed.status, 400, `a write claiming personEditing (${show(claimed.text, 300)})`);
    const answer = await presence(RUNNER, signal);
    note(`presence: ${show(answer, 500)}`);
    const listed = answer.agents.find((a) => a.name.includes(impostor));
    ok(listed, `the impostor is not listed among the agents: ${show(answer.agents)}`);
    includes(listed.name, `${impostor} (unverified)`, 'it is shown as a claim');
    ok(!answer.person.cells.some((c) => c.id === cell.id), `its write shows as the person's: ${show(answer.person)}`);
    eq((await get(cell.id, RUNNER, signal)).personEditing, undefined, 'personEditing after the impostor wrote');
    // Another agent's write to that cell is not held up by it.
    await get(cell.id, RUNNER, signal);
    const other = await patch(cell.id, RUNNER, { code: 'presence_read = 1' }, signal);
    eq(other.status, 200, `another agent's write after the impostor's (${show(other.text, 300)})`);
  }).timeout(30_000);

  it('presence: the bridge’s own write to the cell the person’s cursor is in is not taken for their typing', async () => {
    const { signal, note } = checkRun();
    const cell = cells[3]!;
    await front();
    // The person's cursor in the cell, not typing.
    await row('presence_cursor').locator('.view-lines').first().click({ timeout: 5_000 });
    await get(cell.id, READER, signal);
    for (const n of [2, 3]) {
      const r = await patch(cell.id, READER, { code: `presence_cursor = ${n}` }, signal);
      eq(r.status, 200, `the agent's write ${n - 1} to the cell under the cursor (${show(r.text, 300)})`);
    }
    const seen = await get(cell.id, READER, signal);
    eq(seen.personEditing, undefined, 'the cell view does not say the person is editing');
    const answer = await presence(READER, signal);
    note(`person: ${show(answer.person, 300)}`);
    ok(!answer.person.cells.some((c) => c.id === cell.id && c.secondsSinceKeystroke !== undefined), 'no keystroke of the person');
    await ctx.page.keyboard.press('Escape');
  }).timeout(30_000);
}
