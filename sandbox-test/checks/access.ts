/**
 * The person's side of agent access, driven through the workbench as the person would: the access
 * mode picked from the status bar, an `ask` notification answered with a click, the activity
 * view's rows read from the DOM, and a marked cell's status bar item. Screenshots of the view, a
 * marked cell and the ask prompt go to sandbox-results/ (what the person sees; look at them).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { eq, fail, includes, ok, show } from '../assert';
import { checkRun, suiteState } from './context';
import { screenshot } from '../screenshots';
import { sleep } from '../../src/core/sleep';
import { showcase } from '../showcase';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { toolJson } from './jupyter';

const AGENT = 'harness-agent';
const headers = { 'x-agent-bridge-client': AGENT };

/** Opens the Agent Bridge side bar from the activity bar (its icon may carry a badge over it). */
export async function openAgentBridge(page: Page): Promise<void> {
  await page
    .locator('.activitybar .action-item', { has: page.locator('a[aria-label^="Agent Bridge"]') })
    .first()
    .click({ timeout: 5_000 });
}

/** Widens the side bar by `px` (drags the sash on its right edge), so a screenshot shows whole rows. */
export async function widenSideBar(page: Page, px: number, note: (m: string) => void): Promise<void> {
  const sidebar = await page.locator('.part.sidebar').boundingBox();
  const sashes = await page
    .locator('.monaco-sash.vertical')
    .evaluateAll((els) => els.map((e) => e.getBoundingClientRect()).map((r) => ({ x: r.x + r.width / 2, y: r.y, h: r.height })));
  const edge = sidebar && sashes.find((b) => Math.abs(b.x - (sidebar.x + sidebar.width)) < 6 && b.h > 100);
  if (!edge) return note('no sidebar sash found; the screenshot keeps the default width');
  await page.mouse.move(edge.x, edge.y + edge.h / 2);
  await page.mouse.down();
  await page.mouse.move(edge.x + px, edge.y + edge.h / 2, { steps: 8 });
  await page.mouse.up();
  await page.mouse.move(900, 600);
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
  // Whole: "Agents: ask" must not be taken for "Agents: ask-risky".
  await page
    .locator('.statusbar-item', { hasText: new RegExp(`Agents: ${mode}\\s*$`) })
    .first()
    .waitFor({ timeout: 5_000 });
}

/** The `access` suite's checks. */
export function accessChecks(): void {
  const ctx = suiteState((c) => ({ sid: c.analysis.session.id }));

  /** Runs `body` with the access mode set to `mode` in the status bar, and sets it back to full after. */
  const inMode = async (mode: string, body: () => Promise<void>) => {
    await pickMode(ctx.page, mode);
    try {
      await body();
    } finally {
      await pickMode(ctx.page, 'full');
    }
  };

  /**
   * Sends `code` as a scratchpad run of the harness agent's, waits for the person's prompt showing
   * `prompted`, saves it as the screenshot `shot` and clicks `button`; the prompt's text and the run's answer.
   */
  const answerPrompt = async (
    code: string,
    prompted: string,
    button: 'Allow' | 'Deny',
    shot: string,
    note: (m: string) => void,
  ) => {
    const run = ctx.client.execute(ctx.sid, code, { headers, timeoutMs: 30_000 });
    const toast = ctx.page.locator('.notification-toast', { hasText: prompted }).first();
    await toast.waitFor({ state: 'visible', timeout: 10_000 });
    const prompt = await toast.innerText();
    await sleep(600); // the toast slides in
    await screenshot(ctx.page, shot, note);
    await toast.locator('.monaco-button', { hasText: new RegExp(`^${button}$`) }).click({ timeout: 5_000 });
    return { prompt, result: await run.result };
  };

  it('access: ask mode, the person allows a run from the notification', async () => {
    const { note } = checkRun();
    await inMode('ask', async () => {
      const { prompt, result } = await answerPrompt(
        'print("allowed", 6 * 7)',
        `${AGENT} (unverified) wants a scratchpad run`,
        'Allow',
        'access-ask-prompt.png',
        note,
      );
      includes(prompt, 'print("allowed", 6 * 7)', 'the prompt shows the code');
      eq(result.status, 200, 'status after Allow');
      eq(result.stdout, 'allowed 42\n', 'stdout after Allow');
    });
  }).timeout(45_000);

  it('access: ask-risky mode, print(1) runs unasked; a subprocess run raises the prompt with its finding, and Deny runs nothing', async () => {
    const { note, signal } = checkRun();
    await inMode('ask-risky', async () => {
      const quiet = await ctx.client.run(ctx.sid, 'print(1)', { headers, signal });
      eq(quiet.status, 200, 'print(1) status');
      eq(quiet.stdout, '1\n', 'print(1) ran with no prompt');
      // What it would leave behind in the kernel (a scratchpad keeps changes to modules).
      const risky = 'import builtins; builtins.risky_ran = True\nimport subprocess; subprocess.run(["true"])';
      const { prompt, result } = await answerPrompt(
        risky,
        'that the risk scan flags',
        'Deny',
        'access-ask-risky-prompt.png',
        note,
      );
      note(`prompt: ${show(prompt, 400)}`);
      includes(prompt, `${AGENT} (unverified) wants a scratchpad run`, 'the prompt names the client and the action');
      includes(prompt, 'line 2: subprocess.run (critical): starts a program: true', 'the prompt shows the finding with its line');
      includes(prompt, 'Allow This Kind for 10 Minutes', 'the prompt offers to allow this kind');
      eq(result.status, 403, 'status after Deny');
      includes(result.raw, 'subprocess.run', 'the refusal names the finding');
      const after = await ctx.client.run(ctx.sid, 'import builtins; print(getattr(builtins, "risky_ran", False))', {
        headers,
        signal,
      });
      eq(after.stdout, 'False\n', 'the denied code did not run');
    });
  }).timeout(60_000);

  it('access: dryRun scans and runs nothing; the runs list, get and rerun over HTTP and MCP', async () => {
    const { note, signal } = checkRun();
    const probe = 'import builtins; builtins.dry_ran = True\nimport os; os.system("true")';
    const dry = await ctx.client.post(
      '/api/kernel/execute',
      { code: probe, dryRun: true },
      { headers: { ...headers, 'marimo-session-id': ctx.sid }, signal },
    );
    eq(dry.status, 200, `dryRun status (${show(dry.text, 300)})`);
    const report = (JSON.parse(dry.text) as { risk: { level: string; findings: { pattern: string; line: number }[] } }).risk;
    eq(report.level, 'critical', 'dryRun level');
    eq(report.findings[0]?.pattern, 'os.system', 'dryRun finding');
    const after = await ctx.client.run(ctx.sid, 'import builtins; print(getattr(builtins, "dry_ran", False))', {
      headers,
      signal,
    });
    eq(after.stdout, 'False\n', 'the dry run ran nothing');

    const marker = `history_${Date.now()}`;
    const first = await ctx.client.run(ctx.sid, `print("${marker}")`, { headers, signal });
    eq(first.status, 200, 'a run to list');
    // The credential the run was answered with makes its runs this client's own.
    const mine = { ...headers, 'x-agent-bridge-credential': String(first.headers['x-agent-bridge-credential']) };
    const listed = await ctx.client.get(`/notebooks/runs?notebook=${ctx.sid}&limit=5`, { headers: mine, signal });
    eq(listed.status, 200, `GET /notebooks/runs (${show(listed.text, 300)})`);
    note(`GET /notebooks/runs: ${show(listed.text, 1500)}`);
    const runs = (JSON.parse(listed.text) as { runs: { id: string; codeHash: string; status: string; client: string }[] }).runs;
    const newest = runs[0]!;
    eq(newest.status, 'succeeded', 'the newest run');
    const one = await ctx.client.get(`/notebooks/runs/${newest.id}`, { headers: mine, signal });
    includes(one.text, marker, 'GET /notebooks/runs/:id has the code');
    const rerun = await ctx.client.post(
      `/notebooks/runs/${newest.id}/rerun`,
      { code: `print("${marker}", "again")` },
      { headers: mine, signal },
    );
    eq(rerun.status, 200, `rerun (${show(rerun.text, 300)})`);
    eq((JSON.parse(rerun.text) as { stdout: string[] }).stdout.join(''), `${marker} again\n`, 'rerun with changed code');
    for (const other of [headers, { 'x-agent-bridge-client': 'someone-else' }]) {
      const theirs = await ctx.client.get('/notebooks/runs', { headers: other, signal });
      ok(!theirs.text.includes(newest.id), `a client without the credential sees none of these runs: ${show(theirs.text, 200)}`);
    }

    // An MCP client as an agent's would be (the SDK's, in a session of its own).
    const mcp = new Client({ name: 'harness-mcp-agent', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${ctx.advert.url}/mcp/server`), {
        requestInit: { headers: { authorization: `Bearer ${ctx.advert.token}` } },
      }),
    );
    try {
      const call = async (name: string, args: object) =>
        toolJson((await mcp.callTool({ name, arguments: { ...args } })) as never);
      eq(
        (await call('execute_code', { session_id: ctx.sid, code: `print("${marker}", "mcp")` }))['success'],
        true,
        'MCP execute_code',
      );
      const mcpList = (await call('list_runs', { notebook: ctx.sid, limit: 3 })) as { runs: { id: string; label: string }[] };
      note(`MCP list_runs: ${show(JSON.stringify(mcpList), 1500)}`);
      eq(mcpList.runs.length, 1, 'MCP list_runs: its own run only');
      eq(mcpList.runs[0]?.label, 'mcp execute_code', 'MCP list_runs: the newest run');
      const got = await call('get_run', { run_id: mcpList.runs[0]!.id });
      includes(String(got['code']), `"${marker}", "mcp"`, 'MCP get_run has the code');
      const again = await call('rerun', { run_id: mcpList.runs[0]!.id });
      eq((again['stdout'] as string[]).join(''), `${marker} mcp\n`, 'MCP rerun');
    } finally {
      await mcp.close();
    }
  }).timeout(60_000);

  it('access: GET /notebooks/runs/:id/files lists out/a.csv a run wrote as created, nothing for a run that wrote nothing, and nothing to another agent', async () => {
    const { note, signal } = checkRun();
    const outDir = path.join(ctx.workspace, 'out');
    const target = path.join(outDir, 'a.csv');
    fs.rmSync(outDir, { recursive: true, force: true });
    const py = (text: string) => JSON.stringify(text);
    const write = `import os\nos.makedirs(${py(outDir)}, exist_ok=True)\nopen(${py(target)}, "w").write("x,y\\n1,2\\n")\nprint("wrote")`;
    // Files are matched to runs by their times, which the file system takes from a coarse clock:
    // within a clock tick of a run's start a file cannot be told from the run before (SETUP says so).
    // The runs here begin more than a tick after the one before them.
    await sleep(50);
    const wrote = await ctx.client.run(ctx.sid, write, { headers, signal });
    eq(wrote.stdout, 'wrote\n', `the run that writes (${show(wrote.raw, 300)})`);
    const mine = { ...headers, 'x-agent-bridge-credential': String(wrote.headers['x-agent-bridge-credential']) };
    /** The id of the caller's run of `code` (its record lands as its answer ends: waited for). */
    const runOf = async (code: string) => {
      const hash = createHash('sha256').update(code).digest('hex');
      for (const t0 = Date.now(); Date.now() < t0 + 10_000; await sleep(100)) {
        const listed = await ctx.client.get(`/notebooks/runs?notebook=${ctx.sid}&limit=5`, { headers: mine, signal });
        const run = (JSON.parse(listed.text) as { runs: { id: string; codeHash: string }[] }).runs.find(
          (r) => r.codeHash === hash,
        );
        if (run) return run.id;
      }
      return fail(`no run of ${code} in GET /notebooks/runs`);
    };
    type Files = { files: { path: string; change: string; bytes: number }[]; complete: boolean; reason?: string };
    const filesOf = async (id: string, as: Record<string, string>) => {
      const r = await ctx.client.get(`/notebooks/runs/${id}/files`, { headers: as, signal, timeoutMs: 30_000 });
      return { status: r.status, text: r.text, body: r.status === 200 ? (JSON.parse(r.text) as Files) : undefined };
    };
    const writer = await runOf(write);
    const written = await filesOf(writer, mine);
    note(`GET /notebooks/runs/${writer}/files: ${show(written.text, 800)}`);
    eq(written.status, 200, `GET files (${show(written.text, 300)})`);
    eq(
      JSON.stringify(written.body?.files.map((f) => [f.path, f.change, f.bytes])),
      JSON.stringify([[target, 'created', 8]]),
      'the files listed',
    );
    eq(written.body?.complete, true, 'complete');

    await sleep(50);
    const quiet = await ctx.client.run(ctx.sid, 'print(2)', { headers: mine, signal });
    eq(quiet.stdout, '2\n', 'the run that writes nothing');
    const quietId = await runOf('print(2)');
    const none = await filesOf(quietId, mine);
    note(
      `the run that wrote nothing: ${show((await ctx.client.get(`/notebooks/runs/${quietId}`, { headers: mine, signal })).text, 600)}`,
    );
    eq(none.text, JSON.stringify({ files: [], complete: true }), 'the files of a run that wrote nothing');

    // Another agent, with a credential of its own, and the same name without the credential.
    const other = { 'x-agent-bridge-client': 'another-agent' };
    const theirs = await ctx.client.run(ctx.sid, 'print(3)', { headers: other, signal });
    const otherWithCredential = { ...other, 'x-agent-bridge-credential': String(theirs.headers['x-agent-bridge-credential']) };
    for (const as of [otherWithCredential, headers, {}]) {
      const stolen = await filesOf(writer, as);
      eq(stolen.status, 404, `another client reads the run's files (${JSON.stringify(as)}): ${show(stolen.text, 300)}`);
      ok(!stolen.text.includes('a.csv'), 'the refusal names no file');
    }
    fs.rmSync(outDir, { recursive: true, force: true });
  }).timeout(60_000);

  it('access: "Open Agent Runs as a Notebook" writes the chosen runs as an .ipynb that opens, and its cells run', async () => {
    const { note, signal } = checkRun();
    const marker = `exported_${Date.now()}`;
    eq((await ctx.client.run(ctx.sid, `print("${marker}")`, { headers, signal })).status, 200, 'a run to export');
    await runCommand(ctx.page, 'Agent Bridge: Open Agent Runs as a Notebook');
    const input = ctx.page.locator('.quick-input-widget input.input');
    await ctx.page
      .locator('.quick-input-widget .monaco-list-row', { hasText: 'scratchpad run' })
      .first()
      .waitFor({ timeout: 10_000 });
    await input.first().fill(marker);
    const row = ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: marker });
    await row.first().waitFor({ timeout: 10_000 });
    // The person checks the run (a click on its row toggles it) and accepts.
    try {
      await row.first().click({ timeout: 5_000 });
      await ctx.page.keyboard.press('Enter');
    } catch (error) {
      await ctx.page.keyboard.press('Escape'); // the next checks need the workbench uncovered
      throw error;
    }
    const tab = ctx.page.getByRole('tab', { name: /agent-runs-.*\.ipynb/ });
    await tab
      .first()
      .waitFor({ state: 'visible', timeout: 15_000 })
      .catch(async () => {
        await ctx.page.keyboard.press('Escape');
        fail('no agent-runs-….ipynb editor opened');
      });
    await sleep(800);
    await screenshot(ctx.page, 'access-runs-notebook.png', note);
    const notebooks = JSON.parse((await ctx.client.get('/notebooks', { headers, signal })).text) as {
      notebooks: { path: string | null; uri: string }[];
    };
    const opened = notebooks.notebooks.find((n) => /agent-runs-.*\.ipynb$/.test(n.path ?? ''));
    ok(opened, `the exported notebook is not listed: ${show(JSON.stringify(notebooks), 400)}`);
    // Its kernel is the one the editor picked for it (Agent Bridge Python): an agent may not start one for a file outside the workspace.
    const ran = await ctx.client.post(
      '/notebooks/run',
      { notebook: opened.path, all: true, wait: true, timeoutMs: 60_000 },
      { headers, signal, timeoutMs: 90_000 },
    );
    eq(ran.status, 200, `its cells run (${show(ran.text, 400)})`);
    includes(ran.text, '"success":true', 'the exported cell ran');
    includes(ran.text, marker, 'the exported cell printed again');
  }).timeout(90_000);

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
    // The record's rows (the agents present come first, as "Now: ..." and "Recently: ..." rows: the presence suite reads them).
    const rows = ctx.page
      .locator('[id="workbench.view.extension.agentBridge"] .monaco-list-row')
      .filter({ hasNotText: /^\s*(Now|Recently): / });
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
    // The view beside the notebook whose first cell carries its mark: the Marketplace page's first picture.
    await showcase(ctx.page, 'activity-marked-cell.png', note);
    await widenSideBar(ctx.page, 450, note);
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
