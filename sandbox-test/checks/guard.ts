/**
 * An agent cannot lower the person's guard: what an agent could do with a shell and the token,
 * tried against the real workbench. Workspace settings files that try to loosen access, a
 * grant claimed by name, a request whose client left, oversized batches, active outputs, text
 * the editor would mangle, and a write after another agent's change.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { deepEq, eq, fail, includes, ok, show } from '../assert';
import { pickMode, runCommand } from './access';
import { auditLines, checkRun, readJson, suiteState, workspaceSettings } from './context';
import { sleep } from '../../src/core/sleep';
import { guardLoadChecks } from './guardLoad';

/** Python: a thread that outlives its run and every second makes and runs a cell naming `tag` and the time it was made. */
const lingeringThread = (tag: string) => `import threading, time, agent_bridge
def _linger():
    while True:
        time.sleep(1)
        try:
            with agent_bridge.get_context() as ctx:
                ctx.run_cell(ctx.create_cell("print(%r, %r)" % (${JSON.stringify(tag)}, time.time())))
        except Exception as e:
            print("lingering thread:", type(e).__name__, e)
threading.Thread(target=_linger, daemon=True).start()
print("thread started")`;

/**
 * Python: what kernel.py's import guard of agent_bridge does not cover, the host module it is built
 * on, asked to create a cell holding `<tag>-made`; prints how the call ended.
 */
const directHostCall = (tag: string) => `import _agent_bridge_host as host
try:
    host.call("cells.flush", {"ops": [{"op": "create", "key": "k", "code": "# " + ${JSON.stringify(tag)} + "-made"}], "run": []})
    print("answered")
except host.HostCallError as e:
    print("refused:", type(e).__name__, e)`;

/** Waits until the workbench shows the warning that workspace settings are ignored (VS Code read the file). */
async function ignoredWarning(page: Page): Promise<void> {
  await page
    .locator('.statusbar-item', { hasText: 'Workspace settings ignored' })
    .first()
    .waitFor({ state: 'visible', timeout: 20_000 })
    .catch(() => fail('no status bar warning that the workspace settings are ignored'));
}

/** The `guard` suite's checks. */
export function guardChecks(): void {
  const ctx = suiteState((c) => ({ sid: c.analysis.session.id }));
  /** A cell made through the cell routes, as an agent makes one; its id. */
  const makeCell = async (code: string, signal: AbortSignal) => {
    const r = await ctx.client.post('/notebooks/cells', { notebook: ctx.sid, code }, { signal });
    eq(r.status, 201, `POST /notebooks/cells (${show(r.text, 200)})`);
    return r.json<{ cell: { id: string } }>().cell.id;
  };
  /** The notebook's cells whose code holds `text`. */
  const cellsWith = async (text: string) => {
    const r = await ctx.client.get(`/notebooks/cells?notebook=${ctx.sid}`);
    eq(r.status, 200, `GET /notebooks/cells (${show(r.text, 200)})`);
    return r.json<{ cells: { id: string; code: string }[] }>().cells.filter((c) => c.code.includes(text));
  };
  const removeCell = (id: string) => ctx.client.request({ method: 'DELETE', path: `/notebooks/cells/${id}?notebook=${ctx.sid}` });
  /** Refusals of code-mode calls the audit log records after `since`. */
  const refusedCalls = (since: number) =>
    auditLines(ctx.sandbox.dirs.userData)
      .map((l) => JSON.parse(l) as { time: string; outcome: string; action: string; detail: string })
      .filter((r) => r.outcome === 'refused' && Date.parse(r.time) >= since && /code mode/.test(r.action));
  /** The first of them, once the log has it (it is appended a moment after the refusal). */
  const refusedCall = async (since: number) => {
    for (let tries = 0; tries < 50; tries++, await sleep(200)) {
      const [first] = refusedCalls(since);
      if (first) return first;
    }
    return fail('no refused code-mode call in the audit log');
  };

  it('guard: a workspace settings file that says "full" leaves the person\'s "ask" in force', async () => {
    const { note } = checkRun();
    await pickMode(ctx.page, 'ask');
    try {
      workspaceSettings(ctx, { 'agentBridge.access.mode': 'full', 'agentBridge.requireToken': false });
      await ignoredWarning(ctx.page);
      await ctx.page.locator('.statusbar-item', { hasText: 'Agents: ask' }).first().waitFor({ timeout: 5_000 });
      // The token is still required: the workspace's requireToken=false is ignored too.
      const untokened = await ctx.client.get('/api/sessions', { token: null });
      eq(untokened.status, 401, `GET /api/sessions without the token (${show(untokened.text, 200)})`);
      const run = ctx.client.execute(ctx.sid, 'print("workspace said full")', {
        headers: { 'x-agent-bridge-client': 'guard-agent' },
        timeoutMs: 30_000,
      });
      const toast = ctx.page.locator('.notification-toast', { hasText: 'wants a scratchpad run' });
      await toast
        .first()
        .waitFor({ state: 'visible', timeout: 15_000 })
        .catch(async () => fail(`no ask prompt: the run went ahead (${show(await run.result, 300)})`));
      await toast
        .first()
        .locator('.monaco-button', { hasText: /^Deny$/ })
        .click({ timeout: 5_000 });
      const result = await run.result;
      eq(result.status, 403, `the run after Deny (${show(result.raw, 200)})`);
      note('the prompt came and Deny refused the run');
    } finally {
      workspaceSettings(ctx, undefined);
      await pickMode(ctx.page, 'full');
    }
  }).timeout(90_000);

  it('guard: "Stop Agents" turns agents off while a workspace settings file says "full"', async () => {
    const { signal } = checkRun();
    workspaceSettings(ctx, { 'agentBridge.access.mode': 'full' });
    try {
      await ignoredWarning(ctx.page);
      await runCommand(ctx.page, 'Agent Bridge: Stop Agents');
      const said = ctx.page.locator('.notification-toast', { hasText: 'stopped' });
      await said.first().waitFor({ state: 'visible', timeout: 10_000 });
      includes(await said.first().innerText(), 'access is now off', 'the Stop Agents message');
      const run = await ctx.client.run(ctx.sid, 'print("after stop")', { signal, timeoutMs: 20_000 });
      eq(run.status, 403, `execute after Stop Agents (${show(run.raw, 200)})`);
      const sessions = await ctx.client.get('/api/sessions', { signal });
      eq(sessions.status, 403, 'GET /api/sessions after Stop Agents');
    } finally {
      workspaceSettings(ctx, undefined);
      await pickMode(ctx.page, 'full');
      await sleep(500);
    }
  }).timeout(90_000);

  it('guard: a scratchpad run\'s lingering thread that creates and runs cells through code mode is refused after "Stop Agents": no cell is created after the click, and the refusal is in the log', async () => {
    const { signal, note } = checkRun();
    const tag = `lingering-${Date.now()}`;
    const lingering = lingeringThread(tag);
    const tagged = async () =>
      (await cellsWith(tag)).map((c) => ({ id: c.id, madeAt: Number(/, ([\d.]+)\)/.exec(c.code)?.[1]) * 1000 }));
    const started = await ctx.client.run(ctx.sid, lingering, { signal, timeoutMs: 30_000 });
    eq(started.stdout, 'thread started\n', `the scratchpad run (${show(started.raw, 300)})`);
    await sleep(3_500);
    note(`cells the thread made before the click: ${(await tagged()).length}`);
    const clicked = Date.now();
    await runCommand(ctx.page, 'Agent Bridge: Stop Agents');
    await ctx.page.locator('.notification-toast', { hasText: 'stopped' }).first().waitFor({ state: 'visible', timeout: 10_000 });
    try {
      await sleep(6_000);
      await pickMode(ctx.page, 'full'); // to read the cells again; the thread is still there
      await sleep(3_000);
      const after = (await tagged()).filter((c) => c.madeAt > clicked);
      eq(after.length, 0, `cells the thread made after "Stop Agents": ${after.map((c) => c.id).join(', ')}`);
      const refused = await refusedCall(clicked);
      note(`the log: ${refused.action}: ${refused.detail}`);
    } finally {
      await pickMode(ctx.page, 'full');
      await ctx.client.post('/notebooks/restart', { notebook: ctx.sid }, { timeoutMs: 30_000 }); // ends the thread
      for (const { id } of await tagged()) await removeCell(id);
    }
  }).timeout(90_000);

  it('guard: a notebook cell that calls the bridge directly (import _agent_bridge_host) is refused by the bridge while code mode in cells is off: CallRefused, no cell made, the refusal in the log', async () => {
    const { signal, note } = checkRun();
    const tag = `direct-${Date.now()}`;
    const attack = directHostCall(tag);
    const since = Date.now();
    const id = await makeCell(attack, signal);
    try {
      const r = await ctx.client.post(
        `/notebooks/cells/${id}/run`,
        { notebook: ctx.sid, wait: true, timeoutMs: 30_000, outputs: 'full' },
        { signal, timeoutMs: 35_000 },
      );
      eq(r.status, 200, `the cell's run (${show(r.text, 300)})`);
      const out = r
        .json<{ cell: { outputs: { items: { text?: string }[] }[] } }>()
        .cell.outputs.flatMap((o) => o.items.map((i) => i.text ?? ''))
        .join('');
      note(out.trim());
      includes(out, 'refused: CallRefused', "the cell's call into the bridge");
      eq((await cellsWith(`${tag}-made`)).length, 0, 'cells the direct call made');
      const refused = await refusedCall(since);
      note(`the log: ${refused.action}: ${refused.detail}`);
    } finally {
      await removeCell(id);
      for (const c of await cellsWith(`${tag}-made`)) await removeCell(c.id);
    }
  }).timeout(90_000);

  const stoppers: [string, () => Promise<void>][] = [
    [
      '"Stop Agents"',
      async () => {
        await runCommand(ctx.page, 'Agent Bridge: Stop Agents');
        await ctx.page
          .locator('.notification-toast', { hasText: 'stopped' })
          .first()
          .waitFor({ state: 'visible', timeout: 10_000 });
        await pickMode(ctx.page, 'full'); // to read the cell again
      },
    ],
    ['a switch to read-only', () => pickMode(ctx.page, 'read-only')],
  ];
  for (const [how, stop] of stoppers)
    it(`guard: ${how} interrupts a cell run an agent started without waiting for it (it goes on in the kernel after its answer)`, async () => {
      const { signal, note } = checkRun();
      const id = await makeCell('import time\nprint("looping", flush=True)\nwhile True:\n    time.sleep(0.1)', signal);
      const wait = async (timeoutMs: number) => {
        const r = await ctx.client.post(
          `/notebooks/cells/${id}/wait`,
          { notebook: ctx.sid, timeoutMs, outputs: 'full' },
          { signal, timeoutMs: timeoutMs + 5_000 },
        );
        ok(r.status === 200 || r.status === 504, `POST /notebooks/cells/${id}/wait (${show(r.text, 300)})`);
        return r;
      };
      try {
        const started = await ctx.client.post(`/notebooks/cells/${id}/run`, { notebook: ctx.sid }, { signal });
        eq(started.status, 202, `the run, not waited for (${show(started.text, 200)})`);
        for (const t0 = Date.now(); !(await wait(1_000)).text.includes('looping');)
          ok(Date.now() < t0 + 30_000, 'the loop never printed');
        await stop();
        const ended = await wait(20_000);
        eq(ended.status, 200, `the run after ${how}: it went on (${show(ended.text, 300)})`);
        includes(ended.text, 'KeyboardInterrupt', 'how the run ended');
        note(`the run ended ${ended.json<{ status: string }>().status}`);
      } finally {
        await pickMode(ctx.page, 'full');
        await ctx.client.post('/notebooks/interrupt', { notebook: ctx.sid });
        await removeCell(id);
      }
    }).timeout(90_000);

  it('guard: "Allow for 10 Minutes" binds to the client approved; another process with the same name is asked', async () => {
    const { note } = checkRun();
    const named = { 'x-agent-bridge-client': 'guard-agent' };
    await pickMode(ctx.page, 'ask');
    try {
      const first = ctx.client.execute(ctx.sid, 'print("approved")', { headers: named, timeoutMs: 30_000 });
      const toast = ctx.page.locator('.notification-toast', { hasText: 'guard-agent (unverified) wants a scratchpad run' });
      await toast.first().waitFor({ state: 'visible', timeout: 15_000 });
      await toast
        .first()
        .locator('.monaco-button', { hasText: /^Allow for 10 Minutes$/ })
        .click({ timeout: 5_000 });
      const approved = await first.result;
      eq(approved.status, 200, 'the approved run');
      const credential = approved.headers['x-agent-bridge-credential'];
      ok(typeof credential === 'string' && credential.length >= 20, `no credential handed back: ${show(approved.headers)}`);
      // The approved client, with what it was handed: no prompt (one would hold the run past its timeout).
      const again = await ctx.client.run(ctx.sid, 'print("again")', {
        headers: { ...named, 'x-agent-bridge-credential': credential as string },
        timeoutMs: 15_000,
      });
      eq(again.status, 200, `the approved client's next run (${show(again.raw, 200)})`);
      eq(again.stdout, 'again\n', "the approved client's next run");
      // Another process naming itself the same: asked, and Deny refuses it.
      const impostor = ctx.client.execute(ctx.sid, 'print("impostor")', { headers: named, timeoutMs: 30_000 });
      const asked = ctx.page.locator('.notification-toast', { hasText: 'print("impostor")' });
      await asked
        .first()
        .waitFor({ state: 'visible', timeout: 15_000 })
        .catch(async () => fail(`the same name ran without a prompt (${show((await impostor.result).raw, 200)})`));
      await asked
        .first()
        .locator('.monaco-button', { hasText: /^Deny$/ })
        .click({ timeout: 5_000 });
      eq((await impostor.result).status, 403, 'the impostor after Deny');
      note('approved client ran unprompted; the same name without the credential was asked');
    } finally {
      await pickMode(ctx.page, 'full');
    }
  }).timeout(90_000);

  it('guard: a request whose client left is withdrawn, and the Allow clicked after starts nothing', async () => {
    const { note } = checkRun();
    const marker = path.join(ctx.workspace, `withdrawn-${Date.now()}.txt`);
    await pickMode(ctx.page, 'ask');
    try {
      const gone = new AbortController();
      const run = ctx.client.execute(ctx.sid, `open(${JSON.stringify(marker)}, 'w').write('ran')`, {
        headers: { 'x-agent-bridge-client': 'guard-agent' },
        signal: gone.signal,
        timeoutMs: 30_000,
      });
      const toast = ctx.page.locator('.notification-toast', { hasText: path.basename(marker) });
      await toast.first().waitFor({ state: 'visible', timeout: 15_000 });
      gone.abort(); // the agent gives up and closes its connection
      await run.result.catch(() => undefined);
      const withdrawn = ctx.page.locator('.notification-toast', { hasText: 'Withdrawn:' });
      await withdrawn
        .first()
        .waitFor({ state: 'visible', timeout: 10_000 })
        .catch(() => fail('the prompt was not marked withdrawn after the client left'));
      await toast
        .first()
        .locator('.monaco-button', { hasText: /^Allow$/ })
        .click({ timeout: 5_000 });
      await sleep(2_000);
      ok(!fs.existsSync(marker), 'the code ran after its client had left');
      note('withdrawn notice shown; the late Allow started nothing');
    } finally {
      await pickMode(ctx.page, 'full');
    }
    // The kernel is free: the next run answers at once.
    const next = await ctx.client.run(ctx.sid, 'print("free")', { timeoutMs: 15_000 });
    eq(next.stdout, 'free\n', 'the next run');
  }).timeout(90_000);

  it('guard: a lone surrogate is refused with its position; astral characters and combining marks survive later edits exactly', async () => {
    const { signal } = checkRun();
    const patch = (id: string, code: string) =>
      ctx.client.request({ method: 'PATCH', path: `/notebooks/cells/${id}`, json: { notebook: ctx.sid, code }, signal });
    const get = async (id: string): Promise<string> =>
      (await ctx.client.get(`/notebooks/cells/${id}?notebook=${ctx.sid}`, { signal })).json().cell.code;
    const created = await ctx.client.post(
      '/notebooks/cells',
      { notebook: ctx.sid, code: 'text_check = 0', index: 0 },
      { signal },
    );
    eq(created.status, 201, `create (${show(created.text, 200)})`);
    const id: string = created.json().cell.id;
    const lone = await patch(id, "s = '\ud800'");
    eq(lone.status, 400, `PATCH with a lone surrogate (${show(lone.text, 300)})`);
    includes(lone.json().detail, 'character 5', 'the 400 names the position');
    eq(await get(id), 'text_check = 0', 'the refused text left the cell as it was');
    // Astral characters (two UTF-16 units each) and combining marks, then plain edits after them.
    const texts = ["s = '𝒳😀 e\u0301 n\u0303 👩🏽‍🔬'  # 𝕏", "x = 'ABC'", "t = '🧪' + 'a\u0308'\nu = '𝔘'", "y = 'DEF'  # after"];
    for (const code of texts) {
      const r = await patch(id, code);
      eq(r.status, 200, `PATCH ${show(code)} (${show(r.text, 200)})`);
      eq(await get(id), code, 'the cell holds exactly what was sent');
    }
    const saved = await ctx.client.post('/notebooks/save', { notebook: ctx.sid }, { signal });
    eq(saved.status, 200, `save (${show(saved.text, 200)})`);
    const inFile = readJson(ctx.analysis.path).cells.map((c: { source: string[] | string }) =>
      Array.isArray(c.source) ? c.source.join('') : c.source,
    );
    ok(inFile.includes(texts[texts.length - 1]), `the .ipynb holds the last text exactly: ${show(inFile, 300)}`);
    const removed = await ctx.client.request({ method: 'DELETE', path: `/notebooks/cells/${id}?notebook=${ctx.sid}`, signal });
    deepEq([removed.status], [200], `delete the check's cell (${show(removed.text, 200)})`);
  }).timeout(60_000);

  it("guard: each agent reads for itself — agent B's write after agent A's read refuses A's write, naming B", async () => {
    const { signal } = checkRun();
    const as = (name: string) => ({ 'x-agent-bridge-client': name });
    const created = await ctx.client.post('/notebooks/cells', { notebook: ctx.sid, code: 'shared = 0', index: 0 }, { signal });
    eq(created.status, 201, `create (${show(created.text, 200)})`);
    const id: string = created.json().cell.id;
    const read = (name: string) => ctx.client.get(`/notebooks/cells/${id}?notebook=${ctx.sid}`, { headers: as(name), signal });
    const write = (name: string, code: string) =>
      ctx.client.request({
        method: 'PATCH',
        path: `/notebooks/cells/${id}`,
        json: { notebook: ctx.sid, code },
        headers: as(name),
        signal,
      });
    try {
      eq((await read('agent-a')).status, 200, 'A reads');
      eq((await read('agent-b')).status, 200, 'B reads');
      eq((await write('agent-b', 'shared = "b"')).status, 200, 'B writes');
      const refused = await write('agent-a', 'shared = "a"');
      eq(refused.status, 409, `A's write after B's change (${show(refused.text, 300)})`);
      includes(refused.json().detail, 'agent-b (unverified)', 'the 409 names who changed the cell');
      eq(refused.json().cell.code, 'shared = "b"', 'the 409 returns the current cell');
      const never = await write('agent-c', 'shared = "c"');
      eq(never.status, 409, `a write by an agent that never read the cell (${show(never.text, 300)})`);
      eq(JSON.parse((await read('agent-b')).text).cell.code, 'shared = "b"', "the cell keeps B's change");
    } finally {
      await ctx.client.request({
        method: 'DELETE',
        path: `/notebooks/cells/${id}?notebook=${ctx.sid}`,
        headers: as('agent-b'),
        signal,
      });
    }
  }).timeout(60_000);

  guardLoadChecks();
}
