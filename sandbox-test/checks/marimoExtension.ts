/**
 * marimo notebooks run by the marimo extension's kernel: the `.py` fixture (marimo format) opened
 * through the bridge with kernel "marimo" (when VS Code shows its kernel picker, Playwright picks
 * marimo's controller for the setup's venv as the person would), then marimo-pair's surface, the cell routes, MCP and
 * marimo-pair's code_mode snippet on it. The same checks run against the real extension when
 * SANDBOX_EXTENSIONS gives it (and ms-python.python), else against the FAKE
 * (test/fixtures/fake-marimo); the run's log says which. The fake re-runs dependents as marimo
 * does (those that ran in its kernel, queued first, in the order of marimo's own dataflow graph:
 * its kernel runs in the setup's venv, which has marimo).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deepEq, eq, fail, includes, match, ok, show } from '../assert';
import { PrintGate } from '../printGate';
import type { BridgeClient, SseResult } from '../http';
import { MARIMO_FIXTURE, openPickingKernel } from '../marimoExtension';
import { screenshot } from '../screenshots';
import { callerEnv, checkRun, context, expectOutcome, expectWellFramed } from './context';
import { callTool } from './jupyter';
import { runScript, scriptsDir } from './scripts';
import { sleep } from '../../src/core/sleep';

interface Cell {
  id: string;
  code: string;
  language?: string;
  outputs?: { items?: { mime: string; text?: string }[] }[];
}

/** A waited cell run's answer: the cell, and the runs marimo started on its own meanwhile. */
interface RunAnswer {
  success: boolean;
  cell: Cell;
  alsoRan?: { done: boolean; status: string; cell: Cell }[];
}

/** What a cell showed, as text, for matching (stdout, values, errors). */
const shown = (cell: Cell | undefined) => JSON.stringify(cell?.outputs ?? []);

/** marimo-pair's scripts as an agent outside the sandbox runs them, with the bridge's token. */
function scriptEnv(): NodeJS.ProcessEnv {
  const ctx = context();
  return callerEnv(ctx.sandbox.dirs, ctx.advert.token);
}

export function marimoExtensionChecks(): void {
  let client: BridgeClient;
  let sid = '';
  let file = '';

  before('open the marimo fixture with kernel "marimo"', async function () {
    this.timeout(180_000);
    const ctx = context();
    client = ctx.client;
    file = path.join(ctx.workspace, MARIMO_FIXTURE);
    const r = await openPickingKernel(
      ctx.sandbox.page,
      client.post('/notebooks/open', { path: file, kernel: 'marimo' }, { timeoutMs: 150_000 }),
      ctx.marimo.pick,
    );
    eq(r.status, 200, `POST /notebooks/open ${MARIMO_FIXTURE} with kernel "marimo" (body ${show(r.text, 400)})`);
    sid = r.json().session.id;
    eq(r.json().session.notebookType, 'marimo-notebook', 'notebook type');
  });

  const run = (code: string, signal: AbortSignal, timeoutMs = 30_000): Promise<SseResult> =>
    client.run(sid, code, { signal, timeoutMs });
  const cells = async (signal: AbortSignal): Promise<Cell[]> => {
    const r = await client.get(`/notebooks/cells?notebook=${sid}&outputs=full`, { signal });
    eq(r.status, 200, `GET /notebooks/cells (body ${show(r.text, 300)})`);
    return r.json().cells;
  };
  const runCell = async (id: string, signal: AbortSignal, timeoutMs = 30_000): Promise<RunAnswer> => {
    const r = await client.post(
      `/notebooks/cells/${id}/run`,
      { notebook: sid, wait: true, timeoutMs, outputs: 'full' },
      { signal, timeoutMs: timeoutMs + 5_000 },
    );
    eq(r.status, 200, `run ${id} (body ${show(r.text, 300)})`);
    return r.json();
  };

  it('marimo extension: /api/sessions lists the .py notebook by its path', async () => {
    const { signal } = checkRun();
    const body = (await client.get('/api/sessions', { signal })).json<Record<string, { path: string }>>();
    eq(body[sid]?.path, file, `entry of ${sid} in ${show(body, 400)}`);
  });

  it('marimo extension: the fixture reads as marimo Python cells', async () => {
    const { signal } = checkRun();
    const list = await cells(signal);
    deepEq(
      list.map((c) => c.code),
      ['x = 41', 'y = x + 1', 'print(f"y is {y}")'],
      'cell sources',
    );
    // marimo's own id for its Python cells (marimo-lsp's LanguageId.Python), the fake's too.
    for (const c of list) eq(c.language, 'mo-python', `language of ${c.id}`);
  });

  it('marimo extension: cells asked for as "python" or markup get marimo\'s ids (mo-python, markdown), Python is checked and runs; the kernel\'s state is unknown, saying why', async function () {
    this.timeout(90_000);
    const { signal } = checkRun();
    const listed = await client.get('/notebooks', { signal });
    const entry = listed.json().notebooks.find((n: { sessionId: string }) => n.sessionId === sid);
    deepEq([entry?.kernel, entry?.kernelState], ['marimo', 'unknown'], `GET /notebooks entry ${show(entry, 400)}`);
    includes(entry?.kernelStateNote, 'idle', 'why: marimo reports every kernel as idle');
    const bad = await client.post('/notebooks/cells', { notebook: sid, code: 'def (' }, { signal });
    eq(bad.status, 400, `a syntax error in a marimo Python cell is refused (body ${show(bad.text, 300)})`);
    const created = await client.post(
      '/notebooks/edits',
      {
        notebook: sid,
        ops: [
          { op: 'create', name: 'py', code: 'w = 100 + 41\nw', language: 'python' },
          { op: 'create', name: 'md', code: '# Notes', kind: 'markup' },
        ],
      },
      { signal },
    );
    eq(created.status, 200, `create (body ${show(created.text, 300)})`);
    const made = created.json().cells as (Cell & { kind: string })[];
    deepEq(
      made.map((c) => [c.kind, c.language]),
      [
        ['code', 'mo-python'],
        ['markup', 'markdown'],
      ],
      "the created cells' kinds and languages",
    );
    try {
      const ran = await runCell(made[0]!.id, signal);
      eq(ran.success, true, `run (body ${show(ran, 300)})`);
      includes(shown(ran.cell), '141', 'the cell ran in marimo and shows 141');
    } finally {
      for (const c of made)
        await client.request({ method: 'DELETE', path: `/notebooks/cells/${c.id}?notebook=${sid}&force=true`, signal });
    }
  });

  it('marimo extension: a scratchpad run reads a global a cell defined (x = 41 run → print(x + 1) gives 42)', async function () {
    this.timeout(150_000);
    const { signal } = checkRun();
    const first = (await cells(signal))[0]!;
    // The first run of code starts the real extension's kernel process (uv makes its environment
    // first): 18 s on a loaded 2-core machine, so more than the usual 30 s is allowed.
    eq((await runCell(first.id, signal, 120_000)).success, true, 'run of x = 41');
    const r = await run('print(x + 1)', signal);
    const done = expectWellFramed(r);
    eq(r.stdout, '42\n', `stdout (stderr ${show(r.stderr)})`);
    eq(done.success, true, 'done.success');
  });

  it("marimo extension: GET /notebooks/variables lists x = 41 through marimo's scratchpad; no cell is added, no name left behind", async function () {
    this.timeout(60_000);
    const { signal } = checkRun();
    const list = await cells(signal);
    eq((await runCell(list[0]!.id, signal)).success, true, 'run of x = 41');
    const before = list.length;
    const r = await client.get(`/notebooks/variables?notebook=${sid}`, { signal, timeoutMs: 40_000 });
    eq(r.status, 200, `GET /notebooks/variables (body ${show(r.text, 300)})`);
    const x = r.json<{ variables: { name: string; repr?: string }[] }>().variables.find((v) => v.name === 'x');
    eq(x?.repr, '41', `x in ${show(r.text, 300)}`);
    eq((await cells(signal)).length, before, 'cells');
    const left = await run('print(sorted(k for k in globals() if k.startswith("_agent_bridge")))', signal);
    eq(expectWellFramed(left).success, true, `the probe run (stderr ${show(left.stderr)})`);
    eq(left.stdout, '[]\n', 'names the reading left in the kernel');
  });

  it('marimo extension: the value of a trailing expression is marimo-formatted', async function () {
    this.timeout(40_000);
    const { signal } = checkRun();
    const done = expectWellFramed(await run('x + 1', signal));
    eq(done.success, true, 'done.success');
    includes(done.output.data, '42', `done.output ${show(done.output)}`);
  });

  it('marimo extension: new bindings are discarded', async function () {
    this.timeout(40_000);
    const { signal } = checkRun();
    eq(expectWellFramed(await run('zz_marimo = 1', signal)).success, true, 'binding run');
    const r = await run('zz_marimo', signal);
    eq(expectWellFramed(r).success, false, 'the binding leaked into the kernel');
    includes(r.stderr, 'NameError', 'stderr');
  });

  it('marimo extension: output streams while the run goes on', async function () {
    this.timeout(40_000);
    const { signal } = checkRun();
    // "two" is printed only once the check has seen "one": output held back until the end never ends.
    const gate = new PrintGate(path.dirname(file));
    try {
      const stream = client.execute(sid, gate.code(['one', 'two']), { signal, timeoutMs: 30_000 });
      await gate.follow(stream, ['one', 'two']);
      const result = await stream.result;
      includes(result.stdout, 'one', 'stdout');
      includes(result.stdout, 'two', 'stdout');
    } finally {
      gate.dispose();
    }
  });

  it('marimo extension: raise → a plain-text traceback on stderr (no HTML, no colour codes) on lines of its own, success false', async function () {
    this.timeout(40_000);
    const { signal } = checkRun();
    const r = await run("raise ValueError('boom <b>x</b>')", signal);
    expectOutcome(r, false);
    includes(r.stderr, 'ValueError', 'stderr');
    includes(r.stderr, 'boom', 'stderr');
    // marimo's extension puts its one-line message, without a line break, before the traceback.
    match(r.stderr, /(^|\n)Traceback \(most recent call last\):\n/, 'the traceback starts a line of its own');
    ok(r.stderr.endsWith('\n'), `the traceback ends its line: ${show(r.stderr.slice(-80))}`);
    ok(!/<\/?(a|span|div|pre)\b|class=|href=/i.test(r.stderr), `stderr has HTML: ${show(r.stderr)}`);
    // eslint-disable-next-line no-control-regex
    ok(!/\u001b\[/.test(r.stderr), `stderr has colour codes: ${show(r.stderr)}`);
  });

  it('marimo extension: cells create/edit/move/delete/run on the marimo-notebook; created cells are marimo Python cells', async function () {
    this.timeout(90_000);
    const { signal } = checkRun();
    const created = await client.post('/notebooks/cells', { notebook: sid, code: 'z = x * 2\nz' }, { signal });
    eq(created.status, 201, `create (body ${show(created.text, 300)})`);
    const cell = created.json().cell as Cell & { version: number };
    eq(cell.language, 'mo-python', 'language of the created cell');
    const edited = await client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${cell.id}`,
      json: { notebook: sid, code: 'z = x * 3\nz', version: cell.version },
      signal,
    });
    eq(edited.status, 200, `edit (body ${show(edited.text, 300)})`);
    const ran = await runCell(cell.id, signal);
    eq(ran.success, true, `run (body ${show(ran, 300)})`);
    includes(shown((await cells(signal)).find((c) => c.id === cell.id)), '123', 'the cell shows 123');
    const moved = await client.post(`/notebooks/cells/${cell.id}/move`, { notebook: sid, to: 0 }, { signal });
    eq(moved.status, 200, `move (body ${show(moved.text, 300)})`);
    eq((await cells(signal))[0]?.id, cell.id, 'first cell after the move');
    const removed = await client.request({ method: 'DELETE', path: `/notebooks/cells/${cell.id}?notebook=${sid}`, signal });
    eq(removed.status, 200, `delete (body ${show(removed.text, 300)})`);
    ok(!(await cells(signal)).some((c) => c.id === cell.id), 'the cell is still listed');
  });

  it("marimo extension: reactive: editing x and running it re-runs its dependents; the run's answer lists them with their new outputs", async function () {
    this.timeout(120_000);
    const { signal, note } = checkRun();
    const ctx = context();
    // marimo re-runs only the dependents its kernel has run: cells never run since the kernel
    // started wait (marimo's kernel holds them back, uninstantiated). So every cell runs once
    // first, as it has for a person who ran the notebook.
    for (const c of await cells(signal)) eq((await runCell(c.id, signal)).success, true, `first run of ${c.id} (${c.code})`);
    const list = await cells(signal);
    const first = list.find((c) => c.code === 'x = 41') ?? fail(`no cell "x = 41" in ${show(list)}`);
    const printer = list.find((c) => c.code.startsWith('print(f"y is')) ?? fail(`no print cell in ${show(list)}`);
    includes(shown(printer), 'y is 42', 'the print cell after its first run');
    const edited = await client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${first.id}`,
      json: { notebook: sid, code: 'x = 99', force: true },
      signal,
    });
    eq(edited.status, 200, `edit (body ${show(edited.text, 300)})`);
    const answer = await runCell(first.id, signal);
    eq(answer.success, true, `run of x = 99 (body ${show(answer, 400)})`);
    const rerun = answer.alsoRan?.find((r) => r.cell.id === printer.id);
    note(`alsoRan: ${show(answer.alsoRan?.map((r) => [r.cell.code, r.done, r.status]) ?? [])}`);
    ok(rerun, `the answer lists no re-run of the print cell ${printer.id}: ${show(answer, 600)}`);
    eq(rerun!.done, true, `the print cell's re-run is done (${show(rerun, 300)})`);
    includes(shown(rerun!.cell), 'y is 100', "the print cell's new output in the answer");
    includes(shown((await cells(signal)).find((c) => c.id === printer.id)), 'y is 100', 'the print cell read afterwards');
    await screenshot(ctx.sandbox.page, 'marimo-reactive-run.png', note);
    // Back to the fixture's x for the checks after this one.
    const back = await client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${first.id}`,
      json: { notebook: sid, code: 'x = 41', force: true },
      signal,
    });
    eq(back.status, 200, `edit back (body ${show(back.text, 300)})`);
    eq((await runCell(first.id, signal)).success, true, 'run of x = 41');
  });

  it("marimo extension: /health and the registry entry give the marimo version of the notebook's kernel, the bridge's own as bridgeVersion", async function () {
    this.timeout(60_000);
    const { signal } = checkRun();
    const ctx = context();
    const r = await run('import marimo\nprint(marimo.__version__)', signal);
    expectWellFramed(r);
    const kernelVersion = r.stdout.trim();
    match(kernelVersion, /^\d+\.\d+\.\d+/, "the kernel's marimo version");
    const read = async () => {
      const health = (await client.get('/health', { token: null, signal })).json<{ version: string; bridgeVersion: string }>();
      const entry = JSON.parse(fs.readFileSync(ctx.registryFile, 'utf8')) as { version: string };
      return { health, entry };
    };
    let seen = await read();
    // The version is read in the background once the kernel is there.
    const learned = () => seen.health.version === kernelVersion && seen.entry.version === kernelVersion;
    for (const end = Date.now() + 30_000; Date.now() < end && !learned(); await sleep(250)) seen = await read();
    eq(seen.health.version, kernelVersion, '/health version');
    eq(seen.entry.version, kernelVersion, 'registry entry version');
    eq(seen.health.bridgeVersion, ctx.advert.bridgeVersion, '/health bridgeVersion');
  });

  it("marimo extension: a cell that changes a list in place (rows.append(…)) re-runs none of its readers in marimo; the bridge marks them stale, the run's answer names them, and run-stale re-runs them", async function () {
    this.timeout(120_000);
    const { signal, note } = checkRun();
    const name = `rows_${Date.now().toString(36)}`;
    const made = await client.post(
      '/notebooks/edits',
      {
        notebook: sid,
        ops: [
          { op: 'create', name: 'make', code: `${name} = [1, 2]` },
          { op: 'create', name: 'grow', code: `${name}.append(3)`, after: 'make' },
          { op: 'create', name: 'count', code: `print(len(${name}))`, after: 'grow' },
        ],
      },
      { signal },
    );
    eq(made.status, 200, `create three cells (body ${show(made.text, 300)})`);
    const ids = made.json<{ names: Record<string, string> }>().names;
    const [make, grow, count] = [ids['make']!, ids['grow']!, ids['count']!];
    for (const id of [make, grow, count]) eq((await runCell(id, signal)).success, true, `first run of ${id}`);
    const printed = async () =>
      ((await cells(signal)).find((c) => c.id === count)?.outputs ?? [])
        .flatMap((o) => (o.items ?? []).map((i) => i.text ?? ''))
        .join('')
        .trim();
    eq(await printed(), '3', 'the count after the first runs');
    const again = await runCell(grow, signal);
    note(`alsoRan: ${show(again.alsoRan?.map((r) => r.cell.id) ?? [])}`);
    eq(await printed(), '3', 'marimo did not re-run the reader: it still counts 3');
    const caused = (again as RunAnswer & { stale?: { id: string; reason: string }[] }).stale ?? [];
    deepEq(
      caused.map((s) => s.id),
      [count],
      `the run's answer names the reader it left stale (${show(caused)})`,
    );
    match(caused[0]!.reason, new RegExp(`changes ${name} in place \\(${name}\\.append\\(…\\)\\), ran again`), 'its reason');
    await sleep(1000); // the editor's marks follow once changes settle
    await screenshot(context().sandbox.page, 'marimo-stale.png', note);
    const rerun = await client.post(
      '/notebooks/run-stale',
      { notebook: sid, wait: true, outputs: 'full' },
      { signal, timeoutMs: 35_000 },
    );
    eq(rerun.status, 200, `run-stale (body ${show(rerun.text, 300)})`);
    deepEq(
      rerun.json<{ runs: RunAnswer[] }>().runs.map((r) => r.cell.id),
      [count],
      'run-stale re-ran the reader',
    );
    eq(await printed(), '4', 'which now counts 4');
    for (const id of [count, grow, make])
      await client.request({ method: 'DELETE', path: `/notebooks/cells/${id}?notebook=${sid}&force=true`, signal });
  });

  it('marimo extension: MCP execute_code runs there; list_sessions lists it', async function () {
    this.timeout(40_000);
    const { signal } = checkRun();
    const result = await callTool(client, 'execute_code', { session_id: sid, code: 'print(x + 1)' }, signal);
    ok(!result.isError, `execute_code failed: ${show(result, 400)}`);
    includes(JSON.stringify(result), '42', 'execute_code result');
    const sessions = await callTool(client, 'list_sessions', {}, signal);
    includes(JSON.stringify(sessions), MARIMO_FIXTURE, 'list_sessions');
  });

  it("marimo extension: POST /notebooks/interrupt stops a running scratchpad loop through marimo's interrupt handler", async function () {
    this.timeout(60_000);
    const { signal } = checkRun();
    const stream = client.execute(sid, 'import time\nprint("looping", flush=True)\nwhile True: time.sleep(0.05)', {
      signal,
      timeoutMs: 50_000,
    });
    ok(await stream.next((e) => e.event === 'stdout', 20_000), 'the loop never started');
    const r = await client.post('/notebooks/interrupt', { notebook: sid }, { signal, timeoutMs: 20_000 });
    eq(r.status, 200, `interrupt (body ${show(r.text, 300)})`);
    const result = await stream.result;
    const done = expectWellFramed(result);
    eq(done.success, false, 'done.success of the interrupted run');
    includes(result.stderr, 'KeyboardInterrupt', 'stderr');
    eq(expectWellFramed(await run('x + 1', signal)).success, true, 'the kernel runs the next request');
  });

  it("marimo extension: marimo-pair's code_mode snippet through execute-code.sh creates and runs the cell (ctx.cells lists it), or fails naming the bridge's ways", async function () {
    const dir = scriptsDir();
    if (!dir) this.skip(); // MARIMO_PAIR_SCRIPTS is not set
    this.timeout(60_000);
    const { signal, note } = checkRun();
    const ctx = context();
    const snippet = [
      'import marimo._code_mode as cm',
      'async with cm.get_context() as ctx:',
      '    cid = ctx.create_cell("w = 1")',
      '    ctx.run_cell(cid)',
    ].join('\n');
    const env = scriptEnv();
    const r = await runScript(path.join(dir!, 'execute-code.sh'), ['--url', ctx.advert.url, '--file', file, '-c', snippet], {
      env,
      timeoutMs: 40_000,
      signal,
    });
    const created = (await cells(signal)).find((c) => c.code === 'w = 1');
    if (created) {
      // It worked (marimo-lsp 0.17 hands the kernel the notebook document): the cell is there and ran.
      note(`code_mode created and ran cell ${created.id}`);
      eq(r.code, 0, `exit status (stdout ${show(r.stdout)}, stderr ${show(r.stderr)})`);
      const w = await run('print(w)', signal);
      eq(w.stdout, '1\n', `the new cell's w in the kernel (stderr ${show(w.stderr)})`);
      // The document view marimo-pair reads cells through.
      const read = [
        'import marimo._code_mode as cm',
        'async with cm.get_context() as ctx:',
        '    print([c.code for c in ctx.cells])',
      ];
      const listed = await runScript(
        path.join(dir!, 'execute-code.sh'),
        ['--url', ctx.advert.url, '--file', file, '-c', read.join('\n')],
        {
          env,
          timeoutMs: 40_000,
          signal,
        },
      );
      eq(listed.code, 0, `exit status of the ctx.cells read (stderr ${show(listed.stderr)})`);
      includes(listed.stdout, "'x = 41'", 'ctx.cells');
      includes(listed.stdout, "'w = 1'", 'ctx.cells');
      await screenshot(ctx.sandbox.page, 'marimo-code-mode-cell.png', note);
      const removed = await client.request({
        method: 'DELETE',
        path: `/notebooks/cells/${created.id}?notebook=${sid}&force=true`,
        signal,
      });
      eq(removed.status, 200, `delete the new cell (body ${show(removed.text, 300)})`);
      return;
    }
    eq(r.code, 1, `exit status (stdout ${show(r.stdout)}, stderr ${show(r.stderr)})`);
    match(r.stderr + r.stdout, /\/notebooks\/cells/, 'names the cell routes');
    match(r.stderr + r.stdout, /create_cell/, 'names the MCP tools');
    match(r.stderr + r.stdout, /import agent_bridge/, 'names our code mode');
  });

  it('marimo extension: execute-code.sh --file picks the notebook by path, prints stdout, exits 1 on error', async function () {
    const dir = scriptsDir();
    if (!dir) this.skip(); // MARIMO_PAIR_SCRIPTS is not set
    this.timeout(60_000);
    const { signal } = checkRun();
    const ctx = context();
    const env = scriptEnv();
    const script = path.join(dir!, 'execute-code.sh');
    const good = await runScript(script, ['--url', ctx.advert.url, '--file', file, '-c', 'print(6*7)\nprint(x + 1)'], {
      env,
      timeoutMs: 40_000,
      signal,
    });
    eq(good.code, 0, `exit status (stderr ${show(good.stderr)})`);
    match(good.stdout, /^42\n42\n/, 'stdout');
    const bad = await runScript(script, ['--url', ctx.advert.url, '--file', file, '-c', '1/0'], {
      env,
      timeoutMs: 40_000,
      signal,
    });
    eq(bad.code, 1, `exit status of 1/0 (stdout ${show(bad.stdout)})`);
    includes(bad.stderr + bad.stdout, 'ZeroDivisionError', 'output of 1/0');
  });
}
