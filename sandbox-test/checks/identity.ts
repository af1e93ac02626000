/**
 * An agent's changes are its own: a second process that sends the same name and User-Agent
 * cannot undo them, nor can a client of a later extension host that calls itself the same, while
 * the person can still revert them in "Agent Changes". An agent undoes a chosen change by its
 * checkpoint id. After the extension host is killed, an nbformat 4.4 notebook's cells (no ids in
 * the file) are still known, so the person's Revert of an earlier change finds them.
 *
 * It kills the extension host twice (VS Code starts a new one each time), so it
 * runs after every suite that needs this host's kernels, and leaves the context pointing at the
 * new bridge. Screenshots of the Agent Changes rows go to sandbox-results/ (look at them).
 */
import { auditFiles } from '../../src/access/auditLog';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { deepEq, eq, fail, includes, ok, show } from '../assert';
import { BridgeClient } from '../http';
import { processAlive } from '../../src/discovery';
import { REPO_ROOT } from '../vscode';
import { pickMode, runCommand } from './access';
import { screenshot } from '../screenshots';
import { type BridgeAdvert, checkRun, context, findBridge, readJson, setContext, suiteState } from './context';
import { reviewRows } from './review';
import { randomHex } from '../../src/core/ids';
import { sleep } from '../../src/core/sleep';

interface Cell {
  id: string;
  index: number;
  code: string;
  version: number;
}

interface Change {
  id: number;
  summary: string;
  cells: { id: string; change: string }[];
  undoable: boolean;
}

const CREDENTIAL = 'x-agent-bridge-credential';
/** What two `curl` processes of one agent send alike: a name and curl's User-Agent. */
const BOB = { 'x-agent-bridge-client': 'bob', 'user-agent': 'curl/7.88.1' };

/** The `identity` suite's checks. */
export function identityChecks(): void {
  const ctx = suiteState();
  const tag = randomHex(3);
  const mcpClients: Client[] = [];
  after(() => Promise.all(mcpClients.map((c) => c.close())));
  let shared: string | undefined;
  /** The notebook the first three checks share. */
  const notebook = async (signal: AbortSignal) => (shared ??= await ownCopy('other.ipynb', 'identity', signal));

  const cellsOf = async (notebook: string, signal: AbortSignal): Promise<Cell[]> => {
    const r = await ctx.client.get(`/notebooks/cells?notebook=${encodeURIComponent(notebook)}`, { signal });
    eq(r.status, 200, `GET /notebooks/cells (${show(r.text, 200)})`);
    return r.json<{ cells: Cell[] }>().cells;
  };
  /** A copy of a fixture of its own, opened, so no other check's edits meet it. */
  const ownCopy = async (fixture: string, name: string, signal: AbortSignal): Promise<string> => {
    const nb = path.join(ctx.workspace, `${name}-${tag}.ipynb`);
    fs.copyFileSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures', fixture), nb);
    const opened = await ctx.client.post('/notebooks/open', { path: nb }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `opening ${path.basename(nb)} (${show(opened.text, 200)})`);
    return nb;
  };
  const save = async (nb: string, signal: AbortSignal) => {
    const r = await ctx.client.post('/notebooks/save', { notebook: nb }, { signal, timeoutMs: 30_000 });
    eq(r.status, 200, `saving ${path.basename(nb)} (${show(r.text, 300)})`);
  };
  /** An agent's batch that creates one cell. */
  const createCell = (nb: string, index: number, code: string, headers: Record<string, string>, signal: AbortSignal) =>
    ctx.client.post('/notebooks/edits', { notebook: nb, ops: [{ op: 'create', index, code }] }, { signal, headers });
  const changesOf = async (nb: string, headers: Record<string, string>, signal: AbortSignal): Promise<Change[]> => {
    const r = await ctx.client.get(`/notebooks/changes?notebook=${encodeURIComponent(nb)}`, { signal, headers });
    eq(r.status, 200, `GET /notebooks/changes (${show(r.text, 300)})`);
    return r.json<{ changes: Change[] }>().changes;
  };
  /**
   * The extension's folders in the sandbox's workspace storage: one a workspace (another check
   * opens a second window on another folder), so a file is looked for in each.
   */
  const storageDirs = (): string[] => {
    const root = path.join(ctx.sandbox.dirs.userData, 'User', 'workspaceStorage');
    return (fs.existsSync(root) ? fs.readdirSync(root) : [])
      .map((dir) => path.join(root, dir, 'agent-bridge.agent-bridge'))
      .filter((dir) => fs.existsSync(dir));
  };
  /** Whether one workspace's copy of the extension's file `name` holds `text` (written a moment after a change). */
  const onDisk = (name: string, text: string, signal: AbortSignal, timeoutMs?: number) =>
    ctx.sandbox.waitFor(
      `${name} to hold ${text}`,
      () => {
        signal.throwIfAborted();
        return storageDirs().some((dir) => {
          const file = path.join(dir, name);
          return fs.existsSync(file) && fs.readFileSync(file, 'utf8').includes(text);
        });
      },
      timeoutMs,
    );
  /**
   * A new extension host: the old one is killed (code-server's palette has no "Developer: Restart
   * Extension Host"). VS Code starts a new one itself, or, when it took the kill for a lost
   * connection whose token the server no longer knows, offers "Reload Window", which the person
   * clicks. Waits for the new bridge, and points the context at it (sessions get new ids).
   */
  const newHost = async (note: (m: string) => void): Promise<void> => {
    const old = ctx.advert;
    process.kill(old.pid, 'SIGKILL');
    const reload = ctx.page.locator('.monaco-dialog-box .monaco-button, .notification-toast .monaco-button', {
      hasText: /^Reload Window$/,
    });
    await ctx.sandbox.waitFor(
      'a new extension host',
      async () => {
        if (fs.existsSync(ctx.discoveryFile) && readJson<BridgeAdvert>(ctx.discoveryFile).pid !== old.pid) return true;
        if (await reload.first().isVisible()) {
          note('VS Code could not reconnect to the killed host: Reload Window clicked');
          await reload.first().click({ timeout: 5_000 });
        }
        return false;
      },
      120_000,
    );
    const fresh = await findBridge(ctx.sandbox, ctx.discoveryFile, (a) => a.pid !== old.pid);
    await ctx.sandbox.waitFor(`the old extension host (pid ${old.pid}) to exit`, () => !processAlive(old.pid), 60_000);
    note(`old bridge ${old.url} (pid ${old.pid}), new ${fresh.url} (pid ${fresh.pid})`);
    const client = new BridgeClient(fresh.url, fresh.token);
    const registryFile = path.join(ctx.registryDir, `127.0.0.1_${fresh.port}.json`);
    setContext({ ...context(), advert: fresh, client, registryFile });
    for (const opened of [ctx.analysis, ctx.other]) {
      const r = await client.post('/notebooks/open', { path: opened.path }, { timeoutMs: 30_000 });
      eq(r.status, 200, `reopening ${path.basename(opened.path)} in the new host (${show(r.text, 200)})`);
      opened.session = r.json<{ session: typeof opened.session }>().session;
    }
  };
  /** An MCP client as an agent's would be: the SDK's, naming itself in `clientInfo`. */
  const mcpClient = async (name: string): Promise<{ call: (tool: string, args: object) => Promise<CallToolResult> }> => {
    const mcp = new Client({ name, version: '1.0.0' });
    const url = new URL(`${ctx.advert.url}/mcp/server`);
    await mcp.connect(
      new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${ctx.advert.token}` } } }),
    );
    mcpClients.push(mcp);
    return { call: async (tool, args) => (await mcp.callTool({ name: tool, arguments: { ...args } })) as CallToolResult };
  };
  const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  /** An HTTP client of the new host that sends only the old agent's name: its undo is refused. */
  const namedUndoRefused = async (nb: string, name: string, signal: AbortSignal) => {
    const r = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers: { 'x-agent-bridge-client': name } });
    eq(r.status, 403, `an HTTP client named ${name} (${show(r.text, 300)})`);
  };
  /** The person clicks Revert on the Agent Changes row that reads `label`; returns the notification's text. */
  const revertRow = async (label: string, shot: string, note: (m: string) => void): Promise<string> => {
    const rows = await reviewRows(ctx.page);
    const row = rows.filter({ hasText: label }).first();
    await row.waitFor({ state: 'visible', timeout: 15_000 }).catch(async () => {
      fail(`no "${label}" row in Agent Changes: ${show(await rows.allInnerTexts(), 400)}`);
    });
    note(`review rows: ${show(await rows.allInnerTexts(), 400)}`);
    await row.hover();
    // The row's hover has the long form of the name.
    const hover = ctx.page.locator('.monaco-hover, .workbench-hover', { hasText: 'says it is' }).first();
    await hover.waitFor({ state: 'visible', timeout: 5_000 }).catch(() => note('no hover shown on the row'));
    note(`hover: ${show(await hover.innerText().catch(() => ''), 400)}`);
    await screenshot(ctx.page, shot, note);
    // Earlier notifications (an earlier Revert's) go first, so the one read is this Revert's.
    await runCommand(ctx.page, 'Notifications: Clear All Notifications');
    await row.hover();
    await row.locator('.action-label[aria-label="Revert Agent Change"]').click({ timeout: 5_000 });
    const toast = ctx.page.locator('.notification-toast', { hasText: /Reverted \d+ cell/ }).first();
    await toast.waitFor({ state: 'visible', timeout: 15_000 }).catch(() => fail('no "Reverted" notification after Revert'));
    return toast.innerText();
  };

  it("identity: a second process with the same name and User-Agent cannot undo the first one's change; the first one undoes it with its credential", async () => {
    const { signal } = checkRun();
    const nb = await notebook(signal);
    const code = `bob_was_here_${tag} = 1`;
    const made = await createCell(nb, 0, code, BOB, signal);
    eq(made.status, 200, `bob's batch (${show(made.text, 200)})`);
    // Another process, sending exactly what bob sends but the credential it was handed.
    const other = await ctx.client.post('/notebooks/undo', { notebook: nb }, { signal, headers: BOB });
    eq(other.status, 403, `the other process's undo (${show(other.text, 300)})`);
    includes(other.json<{ detail: string }>().detail, 'X-Agent-Bridge-Credential', 'the refusal says what to send');
    ok(
      (await cellsOf(nb, signal)).some((c) => c.code === code),
      "bob's cell after the other process's undo",
    );
    const credential = made.headers[CREDENTIAL];
    ok(typeof credential === 'string' && credential.length >= 20, `no credential on bob's first write: ${show(made.headers)}`);
    const own = await ctx.client.post(
      '/notebooks/undo',
      { notebook: nb },
      {
        signal,
        headers: { ...BOB, [CREDENTIAL]: credential as string },
      },
    );
    eq(own.status, 200, `bob's undo with its credential (${show(own.text, 300)})`);
    ok(!(await cellsOf(nb, signal)).some((c) => c.code === code), "bob's cell is still there after its undo");
  }).timeout(60_000);

  it('identity: an agent undoes its second-to-last change by its checkpoint id (GET /notebooks/changes lists its own, newest first); a change edited since is a 409 naming the cell', async () => {
    const { signal } = checkRun();
    const nb = await notebook(signal);
    const codes = [`test_cell_${tag} = 1`, `chart_${tag} = 2`];
    const first = await createCell(nb, 0, codes[0]!, BOB, signal);
    eq(first.status, 200, `the first change (${show(first.text, 200)})`);
    const mine = { ...BOB, [CREDENTIAL]: String(first.headers[CREDENTIAL]) };
    const second = await createCell(nb, 1, codes[1]!, mine, signal);
    eq(second.status, 200, `the second change (${show(second.text, 200)})`);
    const changes = await changesOf(nb, mine, signal);
    eq(changes.length, 2, `bob's changes: ${show(changes)}`);
    deepEq(
      changes.map((c) => [c.summary, c.undoable]),
      [
        ['1 added', true],
        ['1 added', true],
      ],
      'newest first, both undoable',
    );
    ok(changes[0]!.id > changes[1]!.id, 'newest first');
    deepEq(await changesOf(nb, BOB, signal), [], 'the changes listed to another process with the same name');
    const undo = await ctx.client.post(
      '/notebooks/undo',
      { notebook: nb, checkpoint: changes[1]!.id },
      { signal, headers: mine },
    );
    eq(undo.status, 200, `undo of the second-to-last change (${show(undo.text, 300)})`);
    const now = (await cellsOf(nb, signal)).map((c) => c.code);
    ok(!now.includes(codes[0]!), `the first change is still there: ${show(now)}`);
    ok(now.includes(codes[1]!), `the last change went too: ${show(now)}`);

    // The last change's cell, edited by someone else since: its undo is refused whole, naming it.
    const chart = (await cellsOf(nb, signal)).find((c) => c.code === codes[1])!;
    const edited = await ctx.client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${chart.id}`,
      json: { notebook: nb, code: `${codes[1]}  # tuned`, force: true },
      headers: { 'x-agent-bridge-client': `someone-${tag}` },
      signal,
    });
    eq(edited.status, 200, `the other edit (${show(edited.text, 200)})`);
    const [last] = await changesOf(nb, mine, signal);
    eq(last?.undoable, false, `the edited change is not undoable: ${show(last)}`);
    const refused = await ctx.client.post('/notebooks/undo', { notebook: nb, checkpoint: last!.id }, { signal, headers: mine });
    eq(refused.status, 409, `undo over later work (${show(refused.text, 300)})`);
    includes(refused.json<{ detail: string }>().detail, chart.id, 'the 409 names the cell');
  }).timeout(60_000);

  it("identity: in ask mode, an agent's undo is asked about naming the change, its cells and whose it is", async () => {
    const { signal, note } = checkRun();
    const nb = await notebook(signal);
    const made = await createCell(nb, 0, `asked_${tag} = 1`, BOB, signal);
    eq(made.status, 200, `bob's change (${show(made.text, 200)})`);
    const mine = { ...BOB, [CREDENTIAL]: String(made.headers[CREDENTIAL]) };
    const [change] = await changesOf(nb, mine, signal);
    await pickMode(ctx.page, 'ask');
    try {
      const undo = ctx.client.post(
        '/notebooks/undo',
        { notebook: nb, checkpoint: change!.id },
        { signal, headers: mine, timeoutMs: 30_000 },
      );
      const toast = ctx.page.locator('.notification-toast', { hasText: 'bob (unverified) wants an undo' }).first();
      await toast.waitFor({ state: 'visible', timeout: 15_000 }).catch(() => fail('no prompt for the undo'));
      const said = await toast.innerText();
      note(`prompt: ${show(said, 300)}`);
      includes(said, `take back its own change ${change!.id}`, 'the prompt names the change and whose it is');
      includes(said, '1 added (cell 1)', 'the prompt names its cells');
      await sleep(600); // the toast slides in
      await screenshot(ctx.page, 'identity-undo-prompt.png', note);
      await toast.locator('.monaco-button', { hasText: /^Allow$/ }).click({ timeout: 5_000 });
      eq((await undo).status, 200, 'the allowed undo');
    } finally {
      await pickMode(ctx.page, 'full');
    }
  }).timeout(60_000);

  /** A batch the kill below cut short: its notebook and its cells before. */
  let cutShort: { nb: string; before: string[] } | undefined;

  it("identity: after the extension host is killed (a 1,000-op batch under way), a new MCP client with the same name cannot undo the old one's change, and the person can still revert it", async () => {
    const { signal, note } = checkRun();
    const nb = await notebook(signal);
    const code = `alice_was_here_${tag} = 1`;
    const alice = await mcpClient('alice');
    const created = await alice.call('create_cell', { notebook: nb, code, index: 0 });
    ok(!created.isError, `alice's create_cell: ${show(text(created), 300)}`);
    await onDisk('agent-changes.json', code, signal);
    await save(nb, signal); // kept whichever way VS Code replaces the host (a window reload may not keep unsaved cells)

    // A batch applied in steps, killed once its record is on disk (before its first step) and its
    // first steps show (reads are answered between steps), or a while after.
    const big = await ownCopy('other.ipynb', 'identity-batch', signal);
    const before = (await cellsOf(big, signal)).map((c) => c.code);
    const ops = Array.from({ length: 1000 }, (_, i) => ({
      op: 'create',
      index: before.length + i,
      code: `cut_${tag}_${i} = ${i}`,
    }));
    void ctx.client
      .post('/notebooks/edits', { notebook: big, ops }, { headers: { 'x-agent-bridge-client': 'batcher' }, timeoutMs: 120_000 })
      .catch(() => undefined); // the kill ends it
    await onDisk('agent-changes.json', '"applying":true', signal);
    cutShort = { nb: big, before };
    await ctx.sandbox
      .waitFor('the first steps of the batch', async () => (await cellsOf(big, signal)).length > before.length, 20_000)
      .catch(() => note('no step of the batch showed before the kill'));

    await newHost(note);
    const again = await mcpClient('alice');
    const undone = await again.call('undo_last_change', { notebook: nb });
    note(`the new alice's undo: ${show(text(undone), 300)}`);
    eq(undone.isError, true, `the new alice's undo_last_change: ${show(text(undone), 300)}`);
    ok(
      (await cellsOf(nb, signal)).some((c) => c.code === code),
      "alice's cell after the new alice's undo",
    );
    await namedUndoRefused(nb, 'alice', signal);

    const said = await revertRow('alice', 'identity-review-rows.png', note);
    note(`after Revert: ${show(said, 300)}`);
    ok(!(await cellsOf(nb, signal)).some((c) => c.code === code), "alice's cell is still there after the person's Revert");
  }).timeout(240_000);

  it('identity: the batch the kill cut short left its change ("cut short") and an audit line; the person\'s Revert takes back what it applied, blaming no one', async () => {
    const { signal, note } = checkRun();
    ok(cutShort, 'the check before this one did not run');
    const { nb, before } = cutShort!;
    const now = (await cellsOf(nb, signal)).map((c) => c.code);
    note(`${now.length - before.length} of the 1,000 cells were applied before the kill`);
    ok(now.length < before.length + 1000, 'the whole batch was applied before the kill');
    // The whole log of every workspace: a full run's earlier checks may have rotated the line into
    // agent-activity.1.jsonl, and the second window's check left a log of its own folder.
    const audit = storageDirs()
      .flatMap((dir) => auditFiles(dir))
      .filter((f) => fs.existsSync(f))
      .flatMap((f) => fs.readFileSync(f, 'utf8').split('\n'));
    ok(
      audit.some((l) => l.includes('"outcome":"applying"') && l.includes(`cut_${tag}_0 = 0`)),
      'no "applying" line of the batch in the audit log',
    );
    const rows = await reviewRows(ctx.page);
    const row = rows.filter({ hasText: 'batcher (unverified): 1000 added' }).first();
    await row
      .waitFor({ state: 'visible', timeout: 15_000 })
      .catch(async () => fail(`no batcher row: ${show(await rows.allInnerTexts(), 400)}`));
    includes(await row.innerText(), 'cut short', 'the row');
    const said = await revertRow('batcher', 'identity-review-cut-short.png', note);
    note(`after Revert: ${show(said, 400)}`);
    ok(!said.includes('person'), `the Revert blames the person: ${said}`);
    deepEq(
      (await cellsOf(nb, signal)).map((c) => c.code),
      before,
      'the cells after Revert',
    );
  }).timeout(120_000);

  it("identity: after the extension host is killed, an nbformat 4.4 notebook's earlier agent change is reverted by the person's Revert, never blaming the person", async () => {
    const { signal, note } = checkRun();
    const nb = await ownCopy('nbformat44.ipynb', 'identity44', signal);
    const before = await cellsOf(nb, signal);
    const target = before[1]!;
    const code = `carol_was_here_${tag} = 1`;
    const changed = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: nb,
        ops: [
          { op: 'edit', ref: target.id, code: `${target.code}\n# carol ${tag}`, version: target.version },
          { op: 'create', index: 2, code },
        ],
      },
      { signal, headers: { 'x-agent-bridge-client': 'carol' } },
    );
    eq(changed.status, 200, `carol's batch (${show(changed.text, 300)})`);
    // Saved (a window reload, should VS Code choose one, may not keep unsaved cells): the file still holds no ids.
    await save(nb, signal);
    ok(
      readJson<{ cells: { id?: string }[] }>(nb).cells.every((c) => c.id === undefined),
      'the saved nbformat 4.4 file holds cell ids',
    );
    // The change and the cell ids on disk once the write delay has passed.
    await onDisk('agent-changes.json', code, signal);
    await onDisk('cell-versions.json', path.basename(nb), signal, 5_000).catch(() => note('no cell ids kept on disk'));

    await newHost(note);
    const after = await cellsOf(nb, signal);
    ok(
      after.some((c) => c.code === code),
      `carol's cells are not in the new host: ${show(after, 400)}`,
    );
    await namedUndoRefused(nb, 'carol', signal);

    const said = await revertRow('carol', 'identity-review-after-kill.png', note);
    note(`after Revert: ${show(said, 400)}`);
    ok(!said.includes('by the person'), `the Revert blames the person: ${said}`);
    includes(said, 'Reverted 2 cells', 'the notification');
    deepEq(
      (await cellsOf(nb, signal)).map((c) => c.code),
      before.map((c) => c.code),
      'the cells after Revert',
    );
  }).timeout(240_000);
}
