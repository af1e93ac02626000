/**
 * The guard under load: the largest batch an agent may send, and more idle sockets than the
 * bridge takes, leave the extension host (which every extension in the window shares) and the
 * person's editor working. Run from the `guard` suite.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { MAX_BATCH_OPS } from '../../src/core/batch';
import { MAX_CONNECTIONS } from '../../src/server/listen';
import { sleep } from '../../src/core/sleep';
import { eq, fail, includes, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { screenshot } from './access';
import { type CheckContext, checkRun, context } from './context';

interface Cell {
  id: string;
  code: string;
}

/** A one-cell notebook of the check's own, opened with the builtin kernel; its session id. */
async function ownNotebook(ctx: CheckContext, name: string, code: string, signal: AbortSignal): Promise<string> {
  const file = path.join(ctx.workspace, name);
  const cell = { cell_type: 'code', id: 'first', metadata: {}, execution_count: null, outputs: [], source: [code] };
  const nb = { cells: [cell], metadata: { language_info: { name: 'python' } }, nbformat: 4, nbformat_minor: 5 };
  fs.writeFileSync(file, `${JSON.stringify(nb, null, 1)}\n`);
  const r = await ctx.client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { signal, timeoutMs: 60_000 });
  eq(r.status, 200, `open ${name} (${show(r.text, 300)})`);
  return r.json<{ session: { id: string } }>().session.id;
}

async function cellsOf(client: BridgeClient, sid: string, signal: AbortSignal): Promise<Cell[]> {
  const r = await client.get(`/notebooks/cells?notebook=${sid}`, { signal, timeoutMs: 60_000 });
  eq(r.status, 200, `GET /notebooks/cells (${show(r.text, 200)})`);
  return r.json<{ cells: Cell[] }>().cells;
}

/** Counts as runs ("1×12, 101×1, ..."), for notes. */
const runs = (values: number[]) =>
  values
    .reduce<[number, number][]>((out, v) => {
      const last = out[out.length - 1];
      if (last && last[0] === v) last[1]++;
      else out.push([v, 1]);
      return out;
    }, [])
    .map(([v, n]) => `${v}×${n}`)
    .join(', ');

/** A GET /health on a fresh connection: its status, or the connection error. */
function freshHealth(ctx: CheckContext): Promise<number | string> {
  return ctx.client.get('/health', { timeoutMs: 10_000 }).then(
    (r) => r.status,
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
}

export function guardLoadChecks(): void {
  let ctx: CheckContext;
  before(() => {
    ctx = context();
  });

  it(`guard: while the largest batch (${MAX_BATCH_OPS} creates) applies, reads sent after it began are answered before it, seeing it applied in steps`, async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const sid = await ownNotebook(ctx, 'guard-batch.ipynb', 'kept = 1', signal);
    const ops = Array.from({ length: MAX_BATCH_OPS }, (_, i) => ({ op: 'create', code: `batch_${i} = ${i}` }));
    let answered = false;
    const batch = client.post('/notebooks/edits', { notebook: sid, ops }, { signal, timeoutMs: 300_000 }).finally(() => {
      answered = true;
    });
    // One read after another until the batch answers: how many cells each saw.
    const seen: number[] = [];
    while (!answered) seen.push((await cellsOf(client, sid, signal)).length);
    const r = await batch;
    eq(r.status, 200, `the batch (${show(r.text, 300)})`);
    note(`cells seen by the reads before the batch answered: ${runs(seen)}`);
    const partial = seen.filter((n) => n > 1 && n < 1 + MAX_BATCH_OPS);
    ok(
      partial.length > 0,
      `no read answered while the batch applied saw it in part (${runs(seen)}): it held the extension host from start to end`,
    );
    const after = await cellsOf(client, sid, signal);
    eq(after.length, 1 + MAX_BATCH_OPS, 'cells after the batch');
    eq(
      after.map((c) => c.code).join('\n'),
      ['kept = 1', ...ops.map((o) => o.code)].join('\n'),
      'the cells, in the batch’s order, after it',
    );
    // The largest batch of deletes takes them away again (applied in steps too).
    const gone = await client.post(
      '/notebooks/edits',
      { notebook: sid, ops: after.slice(1).map((c) => ({ op: 'delete', ref: c.id })) },
      { signal, timeoutMs: 300_000 },
    );
    eq(gone.status, 200, `deleting them (${show(gone.text, 300)})`);
    eq((await cellsOf(client, sid, signal)).map((c) => c.code).join('\n'), 'kept = 1', 'the cells after the deletes');
  }).timeout(600_000);

  it('guard: a large batch whose cell the person types into while it applies is taken back whole, and their typing stays', async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const page = ctx.sandbox.page;
    const file = path.join(ctx.workspace, 'guard-rollback.ipynb');
    const sid = await ownNotebook(ctx, 'guard-rollback.ipynb', 'first_rollback = 1', signal);
    const [first] = await cellsOf(client, sid, signal);
    const front = await client.post('/notebooks/open', { path: file }, { signal });
    eq(front.status, 200, `showing the notebook (${show(front.text, 200)})`);
    // The person's cursor at the end of the first cell, which the batch also rewrites (in its last step).
    const editor = page.locator('.notebook-editor .monaco-list-row .view-lines', { hasText: 'first_rollback' });
    await editor.first().waitFor({ state: 'visible', timeout: 20_000 });
    await editor.first().click({ timeout: 5_000 });
    await page.keyboard.press('End');
    const ops = [
      { op: 'edit', ref: first!.id, code: 'first_rollback = "agent"' },
      ...Array.from({ length: MAX_BATCH_OPS - 1 }, (_, i) => ({ op: 'create', code: `undone_${i} = ${i}` })),
    ];
    let answered = false;
    const batch = client.post('/notebooks/edits', { notebook: sid, ops }, { signal, timeoutMs: 300_000 }).finally(() => {
      answered = true;
    });
    const seen: number[] = [];
    while (!answered) {
      const n = (await cellsOf(client, sid, signal)).length;
      seen.push(n);
      if (n > 1) break;
    }
    // Part applied: the person types.
    await page.keyboard.type('  # mine');
    const r = await batch;
    note(`cells seen before the person typed: ${runs(seen)}; the batch answered ${r.status}`);
    await screenshot(page, 'guard-batch-taken-back.png', note);
    eq(r.status, 409, `the batch the person typed into (${show(r.text, 300)})`);
    includes(r.json<{ detail: string }>().detail, 'nothing was changed', 'the 409 says nothing was changed');
    const cells = await cellsOf(client, sid, signal);
    eq(
      cells.map((c) => c.code).join('|'),
      'first_rollback = 1  # mine',
      "the notebook after: its own cell with the person's typing, none of the batch's",
    );
    eq(cells[0]!.id, first!.id, 'the first cell keeps its id');
  }).timeout(600_000);

  it(`guard: past the connection cap (${MAX_CONNECTIONS}) idle sockets are dropped at once; the person types and runs a cell meanwhile; freed sockets let /health in`, async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const page = ctx.sandbox.page;
    const tag = randomBytes(3).toString('hex');
    const name = `cap_${tag}`;
    // The person's cell, made (and the notebook shown) before the sockets take the bridge.
    const sid = ctx.analysis.session.id;
    const made = await client.post('/notebooks/cells', { notebook: sid, code: `${name} = 6 * 7`, index: 0 }, { signal });
    eq(made.status, 201, `create the person's cell (${show(made.text, 200)})`);
    const cellId: string = made.json<{ cell: Cell }>().cell.id;
    const front = await client.post('/notebooks/open', { path: ctx.analysis.path }, { signal, timeoutMs: 30_000 });
    eq(front.status, 200, `showing analysis.ipynb (${show(front.text, 200)})`);

    const extra = 40;
    const sockets: net.Socket[] = [];
    const dropped = new Set<net.Socket>();
    try {
      for (let i = 0; i < MAX_CONNECTIONS + extra; i++) {
        const socket = net.connect(client.port, client.hostname);
        socket.on('error', () => undefined);
        socket.on('close', () => dropped.add(socket));
        sockets.push(socket);
        await new Promise((r) => socket.once('connect', r).once('close', r));
      }
      await sleep(1_000);
      const held = sockets.length - dropped.size;
      note(`${sockets.length} idle sockets opened: ${dropped.size} dropped by the bridge, ${held} held`);
      ok(
        dropped.size >= extra,
        `only ${dropped.size} of ${sockets.length} idle sockets were dropped: no cap at ${MAX_CONNECTIONS}`,
      );
      ok(held <= MAX_CONNECTIONS, `${held} idle sockets held, over the cap of ${MAX_CONNECTIONS}`);
      const refused = await freshHealth(ctx);
      ok(refused !== 200, `a new connection at the cap was served (${refused}), not dropped`);
      note(`/health on a new connection at the cap: ${refused}`);

      // The person's editor carries on: type into the cell and run it (its run button).
      const editor = page.locator('.notebook-editor .monaco-list-row .view-lines', { hasText: name });
      await editor.first().waitFor({ state: 'visible', timeout: 20_000 });
      await editor.first().click({ timeout: 5_000 });
      await page.keyboard.press('End');
      await page.keyboard.type(`; print(${name})`);
      const row = page
        .locator('.notebook-editor .monaco-list-row', { has: page.locator('.view-lines', { hasText: name }) })
        .first();
      await row.locator('.run-button-container .codicon-notebook-execute').first().click({ timeout: 10_000 });
      await row
        .locator('.codicon-notebook-state-success')
        .first()
        .waitFor({ state: 'visible', timeout: 60_000 })
        .catch(async () => {
          await screenshot(page, 'guard-connection-cap.png', note);
          fail('the cell the person ran never showed success while the sockets were held');
        });
      await page.mouse.move(900, 600); // no tooltip over the cell
      await screenshot(page, 'guard-connection-cap.png', note);
      eq(sockets.length - dropped.size, held, 'idle sockets still held after the person ran the cell');

      // Sockets freed below the cap: a new connection is served.
      for (const socket of sockets.filter((s) => !dropped.has(s)).slice(0, extra)) socket.destroy();
      await sleep(500);
      eq(await freshHealth(ctx), 200, '/health on a new connection once sockets were freed');
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    let cell: { code: string; outputs: { text?: string }[] } | undefined;
    for (const end = Date.now() + 10_000; Date.now() < end; await sleep(200)) {
      const r = await client.get(`/notebooks/cells/${cellId}?notebook=${sid}&outputs=full`, { signal });
      cell = r.json<{ cell: typeof cell }>().cell;
      if (show(cell?.outputs).includes('42')) break;
    }
    eq(cell?.code, `${name} = 6 * 7; print(${name})`, 'the cell holds what the person typed');
    includes(show(cell?.outputs), '42', 'the run the person started printed 42');
    // The person typed in it seconds ago: the check's own cleanup passes force (presence would hold it 10 s).
    const removed = await client.request({
      method: 'DELETE',
      path: `/notebooks/cells/${cellId}?notebook=${sid}&force=true`,
      signal,
    });
    eq(removed.status, 200, `delete the check's cell (${show(removed.text, 200)})`);
  }).timeout(180_000);
}
