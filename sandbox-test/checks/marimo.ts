/** marimo's HTTP surface: /api/sessions and the streamed scratchpad (/api/kernel/execute). */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deepEq, eq, includes, match, ok, show } from '../assert';
import { PrintGate } from '../printGate';
import type { SseResult } from '../http';
import { checkRun, expectOutcome, expectWellFramed, suiteState } from './context';
import { sleep } from '../../src/core/sleep';

/** The `marimo API` suite's checks. */
export function marimoChecks(): void {
  const ctx = suiteState((c) => ({ sid: c.analysis.session.id }));
  const run = (code: string, signal: AbortSignal, session = ctx.sid, timeoutMs = 10_000): Promise<SseResult> =>
    ctx.client.run(session, code, { signal, timeoutMs });

  // ------------------------------------------------------------------------- sessions

  it('sessions: /api/sessions lists both fixtures with absolute paths and s_ ids', async () => {
    const { signal } = checkRun();
    const r = await ctx.client.get('/api/sessions', { signal });
    eq(r.status, 200, 'status');
    match(String(r.headers['content-type']), /^application\/json/, 'content-type');
    const body = r.json<Record<string, { filename: string | null; path: string | null }>>();
    for (const nb of [ctx.analysis, ctx.other]) {
      const entry = Object.entries(body).find(([, v]) => v.path === nb.path);
      ok(entry, `${nb.name}.ipynb (${nb.path}) not listed: ${show(body, 400)}`);
      const [id, v] = entry;
      match(id, /^s_[0-9a-z]{6}$/, `${nb.name} session id`);
      deepEq(v, { session_id: id, filename: nb.path, path: nb.path }, `${nb.name} entry`);
      ok(nb.path.startsWith('/'), `${nb.name} path is not absolute`);
    }
    ok(new Set(Object.keys(body)).size === Object.keys(body).length, 'duplicate ids');
  });

  it('sessions: ids are stable across calls and match /notebooks/open', async () => {
    const { signal } = checkRun();
    const ids = async () => {
      const body = (await ctx.client.get('/api/sessions', { signal })).json<Record<string, { path: string }>>();
      return Object.fromEntries(Object.entries(body).map(([id, v]) => [v.path, id]));
    };
    const first = await ids();
    await sleep(300);
    const second = await ids();
    deepEq(second, first, 'ids on the second call');
    for (const nb of [ctx.analysis, ctx.other])
      eq(first[nb.path], nb.session.id, `${nb.name}: id from /notebooks/open vs /api/sessions`);
    // Re-opening an already open notebook must not mint a new id.
    const again = await ctx.client.post(
      '/notebooks/open',
      { path: ctx.analysis.path, kernel: 'builtin' },
      { signal, timeoutMs: 10_000 },
    );
    eq(again.status, 200, 'status of re-opening analysis.ipynb');
    eq(again.json().session?.id, ctx.analysis.session.id, 'id after re-opening');
  });

  // -------------------------------------------------------------------------- execute

  it('execute: print(2 + 2) streams exactly `event: stdout\\ndata: {"data":"4\\n"}` then done', async () => {
    const { signal } = checkRun();
    const r = await run('print(2 + 2)', signal);
    const done = expectWellFramed(r);
    eq(r.stdout, '4\n', 'concatenated stdout');
    eq(r.stderr, '', 'stderr');
    // Byte-exact framing: every block is `event: X\ndata: <compact JSON>\n\n`, nothing else.
    const expected = r.events
      .map((e) => `event: ${e.event}\ndata: ${e.event === 'done' ? e.rawData : JSON.stringify({ data: e.data.data })}\n\n`)
      .join('');
    eq(r.raw, expected, 'raw body');
    const stdoutEvents = r.events.filter((e) => e.event === 'stdout');
    if (stdoutEvents.length === 1)
      ok(r.raw.startsWith('event: stdout\ndata: {"data":"4\\n"}\n\n'), `raw body starts ${show(r.raw.slice(0, 60))}`);
    eq(done.success, true, 'done.success');
    deepEq(done.output, { mimetype: 'text/plain', data: '' }, 'done.output (no trailing expression)');
  });

  it('execute: trailing expression 1 + 1 gives output "2"', async () => {
    const { signal } = checkRun();
    const r = await run('1 + 1', signal);
    const done = expectOutcome(r, true);
    eq(done.output.data, '2', 'done.output.data');
    eq(r.stdout, '', 'stdout');
  });

  it('execute: raise ValueError streams the traceback on stderr, success false', async () => {
    const { signal } = checkRun();
    const r = await run("raise ValueError('x')", signal);
    const done = expectOutcome(r, false);
    includes(r.stderr, 'Traceback', 'stderr');
    includes(r.stderr, 'ValueError: x', 'stderr');
    ok(!/<\/?(pre|span|div|br|p)\b|class=/i.test(r.stderr), `stderr looks like HTML: ${show(r.stderr)}`);
    deepEq(done.output, { mimetype: 'text/plain', data: '' }, 'done.output');
  });

  it('execute: a syntax error (`def :`) reports on stderr, success false', async () => {
    const { signal } = checkRun();
    const r = await run('def :', signal);
    expectOutcome(r, false);
    ok(r.stderr.trim().length > 0, 'stderr is empty');
    includes(r.stderr, 'SyntaxError', 'stderr');
  });

  it('execute: new top-level bindings are not kept (scratchpad)', async () => {
    const { signal } = checkRun();
    const first = await run('zz_tmp = 1', signal);
    eq(expectWellFramed(first, 'binding run').success, true, 'binding run success');
    const second = await run('zz_tmp', signal);
    const done = expectWellFramed(second, 'lookup run');
    eq(done.success, false, 'lookup of zz_tmp succeeded; the binding leaked into the kernel');
    includes(second.stderr, 'NameError', 'stderr of the lookup');
  });

  it('execute: in-place mutation of an existing object persists', async () => {
    const { signal } = checkRun();
    // sys.modules is a kernel-level object: registering a module is a mutation, not a binding.
    const setup = await run("import sys, types\nsys.modules['ab_probe_state'] = types.SimpleNamespace(items=[])", signal);
    eq(expectWellFramed(setup, 'setup').success, true, `setup success (stderr ${show(setup.stderr)})`);
    const mutate = await run('import ab_probe_state\nab_probe_state.items.append(42)', signal);
    eq(expectWellFramed(mutate, 'mutation').success, true, `mutation success (stderr ${show(mutate.stderr)})`);
    const read = await run('import ab_probe_state\nab_probe_state.items', signal);
    const done = expectWellFramed(read, 'read');
    eq(done.success, true, `read success (stderr ${show(read.stderr)})`);
    eq(done.output.data, '[42]', 'the list after the mutation');
  });

  it('execute: a global defined by running a fixture cell (x = 41) is visible', async () => {
    const { signal } = checkRun();
    const cells = (await ctx.client.get(`/notebooks/cells?notebook=${ctx.sid}`, { signal })).json<{
      cells: { id: string; code: string }[];
    }>().cells;
    const cell = cells?.find((c) => c.code === 'x = 41');
    ok(cell, `fixture cell "x = 41" not in ${show(cells?.map((c) => c.code))}`);
    const ran = await ctx.client.post(
      `/notebooks/cells/${cell.id}/run`,
      { notebook: ctx.sid, wait: true },
      { signal, timeoutMs: 12_000 },
    );
    eq(ran.status, 200, `run status (body ${show(ran.text, 300)})`);
    eq(ran.json().success, true, 'run success');
    const r = await run('print(x + 1)', signal);
    eq(expectWellFramed(r).success, true, `print(x + 1) success (stderr ${show(r.stderr)})`);
    eq(r.stdout, '42\n', 'stdout of print(x + 1)');
  });

  it('execute: unicode round-trips in stdout and in the output', async () => {
    const { signal } = checkRun();
    const text = 'héllo → 世界 🐍 \u00e9\u0301';
    const r = await run(`print(${JSON.stringify(text)})\n${JSON.stringify(text)}`, signal);
    const done = expectWellFramed(r);
    eq(done.success, true, 'done.success');
    eq(r.stdout, `${text}\n`, 'stdout');
    eq(done.output.data, `'${text}'`, 'output (repr of the string)');
  });

  it('execute: output streams as it is printed (each line reaches the client before the next is printed)', async () => {
    const { signal } = checkRun();
    const gate = new PrintGate(ctx.workspace);
    try {
      const lines = ['0', '1', '2'];
      const stream = ctx.client.execute(ctx.sid, gate.code(lines), { signal, timeoutMs: 60_000 });
      await gate.follow(stream, lines);
      const r = await stream.result;
      const done = expectWellFramed(r);
      eq(done.success, true, 'done.success');
      eq(r.stdout, '0\n1\n2\n', 'stdout');
    } finally {
      gate.dispose();
    }
  });

  it('execute: client disconnect interrupts a running `while True` and frees the kernel', async () => {
    const { signal } = checkRun();
    const stream = ctx.client.execute(ctx.sid, 'while True:\n    pass', { signal, timeoutMs: 12_000 });
    await sleep(500);
    ok(
      stream.events.every((e) => e.event !== 'done'),
      `the endless run finished: ${show(stream.events.map((e) => e.rawData))}`,
    );
    stream.disconnect();
    // An endless run left going would keep this one queued until its stream gives up.
    const r = await run("print('kernel free')", signal, ctx.sid, 30_000);
    const done = expectWellFramed(r, 'follow-up run');
    eq(done.success, true, `follow-up success (stderr ${show(r.stderr)})`);
    eq(r.stdout, 'kernel free\n', 'follow-up stdout');
  });

  it('execute: two concurrent runs on one session are serialized', async () => {
    const { signal } = checkRun();
    const code = (tag: string) => `import time\nfor i in range(3):\n    print('${tag}%d' % i, flush=True)\n    time.sleep(0.1)`;
    const a = ctx.client.execute(ctx.sid, code('A'), { signal });
    const b = ctx.client.execute(ctx.sid, code('B'), { signal });
    const [ra, rb] = await Promise.all([a.result, b.result]);
    for (const [r, tag] of [
      [ra, 'A'],
      [rb, 'B'],
    ] as const) {
      eq(expectWellFramed(r, `run ${tag}`).success, true, `run ${tag} success`);
      eq(r.stdout, `${tag}0\n${tag}1\n${tag}2\n`, `run ${tag} stdout`);
    }
    const span = (r: SseResult) => [r.events[0]!.time, r.events[r.events.length - 1]!.time] as const;
    const [a0, a1] = span(ra);
    const [b0, b1] = span(rb);
    ok(
      a1 <= b0 || b1 <= a0,
      `outputs interleaved: A ${a0 - ra.startedAt}..${a1 - ra.startedAt} ms, B ${b0 - ra.startedAt}..${b1 - ra.startedAt} ms`,
    );
  });

  it('sessions: two concurrent /notebooks/open calls both succeed', async () => {
    const { signal } = checkRun();
    // Two more copies of a fixture, opened at the same moment (agents do run in parallel).
    const files = ['concurrent-1.ipynb', 'concurrent-2.ipynb'].map((n) => path.join(ctx.workspace, n));
    for (const f of files) fs.copyFileSync(ctx.analysis.path, f);
    const results = await Promise.all(
      files.map((f) => ctx.client.post('/notebooks/open', { path: f, kernel: 'builtin' }, { signal, timeoutMs: 14_000 })),
    );
    results.forEach((r, i) => eq(r.status, 200, `status of opening ${path.basename(files[i]!)} (body ${show(r.text, 200)})`));
    const body = (await ctx.client.get('/api/sessions', { signal })).json<Record<string, { path: string }>>();
    for (const f of files)
      ok(
        Object.values(body).some((v) => v.path === f),
        `${path.basename(f)} not in /api/sessions`,
      );
  });

  it('execute: each notebook runs in its own session (other.ipynb works too)', async () => {
    const { signal } = checkRun();
    const r = await run("print('from other')", signal, ctx.other.session.id);
    eq(expectWellFramed(r).success, true, 'done.success');
    eq(r.stdout, 'from other\n', 'stdout');
  });
}
