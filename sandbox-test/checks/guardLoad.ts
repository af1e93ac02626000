/**
 * The guard under load: the largest batch an agent may send, and more idle sockets than the
 * bridge takes, leave the extension host (which every extension in the window shares) and the
 * person's editor working. Run from the `guard` suite.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { MAX_BATCH_OPS } from '../../src/core/cells/batch';
import { MAX_CONNECTIONS } from '../../src/server/listen';
import { HELD_LIMITS } from '../../src/server/heldRequests';
import { sleep } from '../../src/core/sleep';
import { eq, fail, includes, match, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { SPIN_REPR } from '../hostileCode';
import { firstSettled } from '../settled';
import { screenshot } from '../screenshots';
import { type CheckContext, checkRun, suiteState } from './context';

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

/** More silent sockets than the bridge takes. */
const IDLE_SOCKETS = 300;

/** A GET /health on a fresh connection: its status, or the connection error. */
function freshHealth(ctx: CheckContext): Promise<number | string> {
  return ctx.client.get('/health', { timeoutMs: 10_000 }).then(
    (r) => r.status,
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
}

export function guardLoadChecks(): void {
  const ctx = suiteState();

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

  it(`guard: with ${IDLE_SOCKETS} idle sockets and ${MAX_CONNECTIONS} open waits from one client, another agent's print(1) is answered with its output; the person types and runs a cell meanwhile`, async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const page = ctx.sandbox.page;
    const tag = randomBytes(3).toString('hex');
    const name = `cap_${tag}`;
    // A cell that runs for as long as the check does, for the flood of waits to wait on.
    const waitsOn = await ownNotebook(ctx, 'guard-waits.ipynb', 'import time\ntime.sleep(600)', signal);
    const [sleeper] = await cellsOf(client, waitsOn, signal);
    const started = await client.post(`/notebooks/cells/${sleeper!.id}/run`, { notebook: waitsOn }, { signal });
    eq(started.status, 202, `run the sleeping cell (${show(started.text, 200)})`);
    // The person's cell, made (and the notebook shown) before the sockets take the bridge.
    const sid = ctx.analysis.session.id;
    const made = await client.post('/notebooks/cells', { notebook: sid, code: `${name} = 6 * 7`, index: 0 }, { signal });
    eq(made.status, 201, `create the person's cell (${show(made.text, 200)})`);
    const cellId: string = made.json<{ cell: Cell }>().cell.id;
    const front = await client.post('/notebooks/open', { path: ctx.analysis.path }, { signal, timeoutMs: 30_000 });
    eq(front.status, 200, `showing analysis.ipynb (${show(front.text, 200)})`);

    const sockets: net.Socket[] = [];
    const dropped = new Set<net.Socket>();
    const flood = new AbortController();
    setMaxListeners(MAX_CONNECTIONS + 10, flood.signal); // one per wait
    const openIdle = () => {
      const socket = net.connect(client.port, client.hostname);
      socket.on('error', () => undefined);
      socket.resume();
      socket.on('close', () => dropped.add(socket));
      sockets.push(socket);
      return new Promise((r) => socket.once('connect', r).once('close', r));
    };
    // Renewed at will: one more silent socket every 20 ms for as long as the check runs.
    let renewing: NodeJS.Timeout | undefined;
    try {
      for (let i = 0; i < IDLE_SOCKETS; i++) await openIdle();
      note(`${sockets.length} idle sockets opened: ${dropped.size} closed by the bridge as more came`);
      renewing = setInterval(() => void openIdle(), 20);
      // One client's flood of waits, each open until the check ends: a share of them is held, the rest refused.
      const flooder = { 'x-agent-bridge-client': `flood-${tag}` };
      const waits = Array.from({ length: MAX_CONNECTIONS }, () =>
        client
          .post(
            `/notebooks/cells/${sleeper!.id}/wait`,
            { notebook: waitsOn, timeoutMs: 600_000 },
            {
              signal: flood.signal,
              timeoutMs: 600_000,
              headers: flooder,
            },
          )
          .then(
            (r) => r.status,
            (error: unknown) => (error instanceof Error ? error.message : String(error)),
          ),
      );
      // The client's share is held (which ones, the bridge decides); the rest are answered at once.
      const past = MAX_CONNECTIONS - HELD_LIMITS.perClient;
      const refused = (await firstSettled(waits, past, 120_000)) as (number | string)[];
      const tally = (values: (number | string)[]) =>
        [...new Set(values)].map((v) => `${values.filter((x) => x === v).length}× ${v}`).join(', ');
      // Another agent: its print(1) is answered with its output.
      const t0 = performance.now();
      const other = await client
        .run(sid, 'print(1)', { signal, timeoutMs: 60_000, headers: { 'x-agent-bridge-client': `other-${tag}` } })
        .catch((error: unknown) => fail(`another agent's print(1) got no answer: ${String(error)}`));
      note(`another agent's print(1) answered in ${(performance.now() - t0).toFixed(0)} ms`);
      eq(other.stdout, '1\n', `another agent's print(1) (stderr ${show(other.stderr)}, status ${other.status})`);
      eq(await freshHealth(ctx), 200, '/health on a new connection');
      note(`the ${refused.length} waits answered (of ${MAX_CONNECTIONS}): ${tally(refused)}`);
      // A 429, or, when every socket had a request in flight as it came, a connection closed at once.
      const closedAtCap = (r: number | string) => typeof r === 'string' && /connection closed without a response/.test(r);
      ok(
        refused.length === past && refused.every((r) => r === 429 || closedAtCap(r)),
        `one client's ${past} waits past its share of ${HELD_LIMITS.perClient} were not all refused: ${tally(refused)}`,
      );
      const limited = await client.post(
        `/notebooks/cells/${sleeper!.id}/wait`,
        { notebook: waitsOn, timeoutMs: 600_000 },
        {
          signal,
          headers: flooder,
        },
      );
      eq(limited.status, 429, 'one more wait of the flooding client');
      includes(limited.json<{ detail: string }>().detail, `(${HELD_LIMITS.perClient})`, 'the 429 names the limit');

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
          fail('the cell the person ran never showed success while the sockets and waits were held');
        });
      await page.mouse.move(900, 600); // no tooltip over the cell
      await screenshot(page, 'guard-connection-cap.png', note);
      const answered = await firstSettled(waits, MAX_CONNECTIONS, 0);
      eq(answered.length, past, `waits answered by now: the flooding client's ${HELD_LIMITS.perClient} are still held`);
    } finally {
      clearInterval(renewing);
      note(`${sockets.length} idle sockets in all, ${dropped.size} of them closed by the bridge`);
      flood.abort();
      for (const socket of sockets) socket.destroy();
      await client.post('/notebooks/interrupt', { notebook: waitsOn }, { timeoutMs: 30_000 }).catch(() => undefined);
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
  }).timeout(300_000);

  it('guard: a repr that switches tracing off and spins costs its own item: three variables reads list every other variable, and the kernel idles after (< 5% CPU)', async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const code = `${SPIN_REPR}\nimport threading\nkept_before, kept_after = 41, [1, 2]\nthreads_then = threading.active_count()`;
    const sid = await ownNotebook(ctx, 'guard-spin.ipynb', code, signal);
    const [cell] = await cellsOf(client, sid, signal);
    const ran = await client.post(
      `/notebooks/cells/${cell!.id}/run`,
      { notebook: sid, wait: true, timeoutMs: 60_000 },
      {
        signal,
        timeoutMs: 70_000,
      },
    );
    eq(ran.json<{ success?: boolean }>().success, true, `the cell that makes spin (${show(ran.text, 300)})`);
    type Listed = { name: string; repr?: string | null; reprError?: string };
    for (let read = 1; read <= 3; read++) {
      const r = await client.get(`/notebooks/variables?notebook=${sid}`, { signal, timeoutMs: 30_000 });
      eq(r.status, 200, `variables read ${read} (${show(r.text, 300)})`);
      const byName = new Map(r.json<{ variables: Listed[] }>().variables.map((v) => [v.name, v]));
      note(`read ${read}: spin ${show(byName.get('spin'))}`);
      eq(byName.get('kept_before')?.repr, '41', `read ${read}: kept_before`);
      eq(byName.get('kept_after')?.repr, '[1, 2]', `read ${read}: kept_after`);
      eq(byName.get('spin')?.repr, null, `read ${read}: spin's repr`);
      match(byName.get('spin')?.reprError ?? '', /took longer than 0\.5 s/, `read ${read}: spin's reprError`);
    }
    // The kernel's own CPU time over 2 s of sleep: a thread left spinning would take most of a CPU.
    const idle = await client.run(
      sid,
      [
        'import resource, time, threading',
        'cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])',
        'before, t0 = cpu(), time.monotonic()',
        'time.sleep(2)',
        'print(round((cpu() - before) / (time.monotonic() - t0) * 100, 1), threading.active_count() - threads_then)',
      ].join('\n'),
      { signal, timeoutMs: 30_000 },
    );
    const [percent, added] = idle.stdout.trim().split(' ').map(Number);
    note(`the kernel used ${percent}% of a CPU while idle; ${added} threads more than before the reads`);
    ok(
      percent !== undefined && percent < 5,
      `the idle kernel used ${idle.stdout.trim()}% of a CPU (stderr ${show(idle.stderr)})`,
    );
    eq(added, 2, 'threads the reads added: the inspect worker and its watchdog, once');
  }).timeout(180_000);

  it('guard: a cell too deeply nested to check leaves the others checked: beside a 5,000-term cell, `def broken(:` gets a 400', async () => {
    const { signal, note } = checkRun();
    const { client } = ctx;
    const deep = `total = ${Array.from({ length: 5000 }, () => 'x').join(' + ')}`;
    // A notebook as cloned, with the deep cell in it, and its kernel running (the analysis is the kernel's own).
    const sid = await ownNotebook(ctx, 'guard-deep.ipynb', deep, signal);
    const warm = await client.run(sid, 'x = 1', { signal, timeoutMs: 60_000 });
    eq(warm.done?.data?.success, true, `the kernel starts (stderr ${show(warm.stderr)})`);
    const broken = await client.post('/notebooks/cells', { notebook: sid, code: 'def broken(:' }, { signal, timeoutMs: 60_000 });
    note(`def broken(: → ${broken.status} ${show(broken.text, 200)}`);
    eq(broken.status, 400, `writing def broken(: (${show(broken.text, 300)})`);
    match(broken.json<{ detail: string }>().detail, /Syntax error/, 'the 400 says why');
    const again = await client.post('/notebooks/cells', { notebook: sid, code: deep }, { signal, timeoutMs: 60_000 });
    eq(again.status, 400, `writing a second deep cell (${show(again.text, 300)})`);
    match(again.json<{ detail: string }>().detail, /too deeply nested to check/, 'the 400 says why');
    const unchecked = await client.post(
      '/notebooks/cells',
      { notebook: sid, code: deep, strict: false },
      { signal, timeoutMs: 60_000 },
    );
    eq(unchecked.status, 201, `the same with "strict": false (${show(unchecked.text, 300)})`);
    eq((await cellsOf(client, sid, signal)).length, 2, 'the cells after: the deep one, and the one written unchecked');
  }).timeout(180_000);
}
