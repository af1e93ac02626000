/**
 * The real Jupyter extension (ms-toolsai.jupyter) beside the bridge, with Debian's python3
 * ipykernel: the same end-to-end checks as on the builtin kernel, over HTTP, MCP and the real
 * execute-code.sh, plus the person's consent as they meet it in the workbench (Playwright clicks
 * the buttons of Jupyter's dialog).
 *
 * The extension comes in by path (SANDBOX_EXTENSIONS, see ../extensions.ts); without it every
 * check here is reported pending, by name. The kernel is ipykernel from the setup's venv, offered
 * to Jupyter through a kernelspec in the sandbox's own Jupyter data folder.
 *
 * Two notebooks, because Jupyter remembers an answer: Allow for good (every kernel), Cancel per
 * kernel. `jupyter-refused.ipynb` meets Cancel first; `jupyter.ipynb` then gets Allow (after a
 * request abandoned while the dialog was up) and carries the functional checks.
 */
import { spawn } from 'node:child_process';
import * as net from 'node:net';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eq, includes, match, ok, show } from '../assert';
import type { BridgeClient, SseResult } from '../http';
import { MARKER_VAR, type Sandbox, STACK } from '../vscode';
import { findExtension, type GivenExtension, JUPYTER_ID } from '../extensions';
import { type CheckContext, checkRun, expectWellFramed, readJson, skipped, suiteState } from './context';
import { runScript, scriptsDir } from './scripts';
import { sleep } from '../../src/core/sleep';
import { randomHex } from '../../src/core/ids';

const NAMES = {
  startRefused:
    "jupyter: POST /notebooks/kernel/start has the person pick jupyter-refused.ipynb's kernel in Jupyter's list, then starts it",
  counted: 'jupyter: a started kernel is counted at once in /api/sessions, the discovery file and the status bar',
  waiting: "jupyter: a request waits for the person's answer, said on its stream and in our notification",
  cancel: 'jupyter: Cancel in the dialog → the waiting run fails with the refusal',
  refused:
    'jupyter: after Cancel → 403 naming "Jupyter: Manage Access To Jupyter Kernels"; the session shows the refusal; the log says why',
  startMcp: "jupyter: MCP start_kernel starts jupyter.ipynb's kernel",
  abandoned: 'jupyter: a request abandoned while the dialog is up never runs, even after Allow',
  allowed: 'jupyter: after Allow (clicked in the workbench) requests run at once',
  stdout: 'jupyter: execute print(x) streams stdout from the notebook globals (x = 41 from a cell run)',
  value: 'jupyter: execute trailing expression x + 1 gives output "42"',
  error: 'jupyter: execute raise → the traceback once on stderr, tag-like text kept, success false',
  scratchpad: 'jupyter: new bindings are discarded; In, Out, _ and the execution count are untouched',
  variables:
    'jupyter: GET /notebooks/variables lists x = 41 through executeCode (store_history false); In, Out, _ and the execution count are untouched',
  rich: 'jupyter: display(HTML) and a PNG display arrive as their MIME data',
  cells: 'jupyter: cells list/edit/run-and-wait with HTML and PNG outputs',
  runAll:
    'jupyter: a run of many stops at the first error: the cells Jupyter cancels behind it end as skipped and never run, with onError stop and continue alike',
  interrupt:
    "jupyter: POST /notebooks/interrupt stops a running loop through Jupyter's interrupt (Jupyter cancels the request: no KeyboardInterrupt traceback)",
  disconnect: 'jupyter: client disconnect interrupts a running loop and frees the kernel',
  restart:
    "jupyter: POST /notebooks/restart restarts through Jupyter's command once the person confirms: state lost, session kept",
  mcp: 'jupyter: MCP execute_code returns stdout, value and errors',
  script: 'jupyter: execute-code.sh (real script) prints stdout and value, exits 1 on error',
  server:
    'jupyter: a kernel on a Jupyter Server (127.0.0.1, token), picked as "Existing Jupyter Server..." in the workbench, runs the scratchpad',
} as const;

export const WAITING = "Waiting for the person's permission in VS Code";
export const MANAGE = 'Jupyter: Manage Access To Jupyter Kernels';
/** A 1x1 PNG. */
const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** One MCP tool call over Streamable HTTP; the result (SSE or JSON reply). */
export async function callTool(client: BridgeClient, name: string, args: object, signal: AbortSignal, timeoutMs = 60_000) {
  const r = await client.post(
    '/mcp/server',
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
    { headers: { accept: 'application/json, text/event-stream' }, signal, timeoutMs },
  );
  eq(r.status, 200, `MCP ${name} status (${show(r.text, 300)})`);
  const data = r.text.includes('data: ')
    ? r.text
        .split('\n')
        .find((l) => l.startsWith('data: '))!
        .slice(6)
    : r.text;
  const message = JSON.parse(data) as {
    result?: { isError?: boolean; structuredContent?: Record<string, unknown>; content?: { type: string; text?: string }[] };
  };
  ok(message.result, `MCP ${name}: no result in ${show(data, 300)}`);
  return message.result;
}

/** A tool result's JSON: marimo's tools carry structured content; the cell tools one JSON text. */
export function toolJson(result: { structuredContent?: Record<string, unknown>; content?: { type: string; text?: string }[] }) {
  return (
    result.structuredContent ??
    (JSON.parse(result.content?.find((c) => c.type === 'text')?.text ?? '{}') as Record<string, unknown>)
  );
}

/** The person's side of Jupyter's prompts in the workbench, as Playwright sees and clicks it. */
export function jupyterWorkbench(sandbox: Sandbox) {
  const page = sandbox.page;
  const dialogButton = (text: string) =>
    page.locator('.monaco-dialog-box .monaco-button').filter({ hasText: new RegExp(`^${text}$`) });
  const dialogShown = () =>
    sandbox.waitFor('Jupyter\'s "grant Kernel access" dialog', () => dialogButton('Allow').isVisible(), 20_000);
  /** Waits for a notification of ours (toasts stack and animate in: poll). */
  const notification = (text: string) =>
    sandbox.waitFor(
      `the notification "${text}"`,
      async () => (await page.locator('.notifications-toasts').innerText()).includes(text),
      10_000,
    );
  /** Picks the notebook's kernelspec in the list Jupyter shows the person when the bridge starts a kernel. */
  const pickKernel = async () => {
    const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Python 3 (ipykernel)' }).first();
    await row.waitFor({ state: 'visible', timeout: 60_000 });
    await notification('an agent asks to start a Jupyter kernel');
    await row.click();
  };
  return { dialogButton, dialogShown, notification, pickKernel };
}

/** A session whose kernel the person refused: 403 naming the command, no session, MCP says so too. */
export async function expectRefused(client: BridgeClient, sessionId: string, signal: AbortSignal): Promise<void> {
  const r = await client.execute(sessionId, 'print("ran")', { signal }).result;
  eq(r.status, 403, `status (${show(r.raw, 300)})`);
  includes(JSON.parse(r.raw).detail, MANAGE, 'detail');
  const notebooks = (await client.get('/notebooks', { signal })).json<{
    notebooks: { sessionId: string; kernel: string | null; kernelUnavailable?: string }[];
  }>();
  const entry = notebooks.notebooks.find((n) => n.sessionId === sessionId);
  eq(entry?.kernel, null, 'GET /notebooks kernel');
  includes(entry?.kernelUnavailable, 'refused', 'GET /notebooks kernelUnavailable');
  const sessions = (await client.get('/api/sessions', { signal })).json<Record<string, unknown>>();
  ok(!(sessionId in sessions), '/api/sessions still lists the refused session');
  const mcp = await callTool(client, 'execute_code', { session_id: sessionId, code: 'print(1)' }, signal);
  eq(mcp.structuredContent?.['success'], false, 'MCP execute_code success');
  includes(String(mcp.structuredContent?.['error']), MANAGE, 'MCP execute_code error');
}

/** The `jupyter` suite's checks (reported pending by name, with the reason, without the extension). */
export function jupyterChecks(extensions: readonly GivenExtension[]): void {
  const extension = findExtension(extensions, JUPYTER_ID);
  if ('skip' in extension) return skipped(Object.values(NAMES), extension.skip);
  const ctx = suiteState((c) => ({
    refusedPath: path.join(c.workspace, 'jupyter-refused.ipynb'),
    mainPath: path.join(c.workspace, 'jupyter.ipynb'),
    ...jupyterWorkbench(c.sandbox),
  }));
  let refusedSid = '';
  let sid = '';
  const run = (code: string, signal: AbortSignal, session = sid, timeoutMs = 20_000): Promise<SseResult> => {
    ok(session, 'no Jupyter session (the start check failed)');
    return ctx.client.run(session, code, { signal, timeoutMs });
  };
  const statusText = () => ctx.page.locator('.statusbar-item', { hasText: 'Bridge :' }).first().innerText();

  it(NAMES.startRefused, async () => {
    const { signal } = checkRun();
    const started = ctx.client.post(
      '/notebooks/kernel/start',
      { notebook: ctx.refusedPath, kernel: 'jupyter' },
      { signal, timeoutMs: 110_000 },
    );
    await ctx.pickKernel();
    const r = await started;
    eq(r.status, 200, `status (${show(r.text, 400)})`);
    const body = r.json<{ session: { id: string; path: string }; kernel: string }>();
    eq(body.kernel, 'jupyter', 'kernel');
    eq(body.session.path, ctx.refusedPath, 'session path');
    refusedSid = body.session.id;
  }).timeout(120_000);

  it(NAMES.counted, async () => {
    const { signal } = checkRun();
    ok(refusedSid, 'no session from the start check');
    const sessions = (await ctx.client.get('/api/sessions', { signal })).json<Record<string, { path: string }>>();
    eq(sessions[refusedSid]?.path, ctx.refusedPath, '/api/sessions entry');
    const count = Object.keys(sessions).length;
    await ctx.sandbox.waitFor(
      'the discovery file to list the Jupyter session',
      () => readJson<{ sessions: { id: string }[] }>(ctx.discoveryFile).sessions.some((s) => s.id === refusedSid),
      10_000,
    );
    await ctx.sandbox.waitFor(
      `the status bar to count ${count} sessions`,
      async () => (await statusText()).endsWith(`· ${count}`),
      10_000,
    );
  });

  it(NAMES.waiting, async () => {
    const { note } = checkRun();
    ok(refusedSid, 'no session from the start check');
    // Not tied to this check's signal: the Cancel check answers the dialog and reads its end.
    const stream = ctx.client.execute(refusedSid, 'print("ran")', { timeoutMs: 60_000 });
    pendingRefusal = stream.result;
    const line = await stream.next((e) => e.event === 'stderr' && String(e.data?.data).includes(WAITING), 20_000);
    ok(line, `no "${WAITING}" line on the stream: ${show(stream.events.map((e) => e.rawData))}`);
    await ctx.dialogShown();
    await ctx.notification('Agent Bridge: an agent is waiting for your permission');
    note(`stream: ${line.data.data.trim()}`);
  }).timeout(40_000);
  let pendingRefusal: Promise<SseResult> | undefined;

  it(NAMES.cancel, async () => {
    ok(pendingRefusal, 'no waiting request from the previous check');
    await ctx.dialogButton('Cancel').click({ timeout: 10_000 });
    const r = await pendingRefusal;
    const done = expectWellFramed(r);
    eq(done.success, false, 'done.success');
    includes(r.stderr, 'The person refused Agent Bridge access', 'stderr');
    includes(r.stderr, MANAGE, 'stderr names the command');
    ok(!r.stdout.includes('ran'), `the code ran: ${show(r.stdout)}`);
  });

  it(NAMES.refused, async () => {
    const { signal } = checkRun();
    await expectRefused(ctx.client, refusedSid, signal);
    const log = bridgeLog(ctx);
    includes(
      log,
      'The person refused Agent Bridge access to the Jupyter kernel',
      `the bridge's log (${log ? 'found' : 'not found'})`,
    );
  });

  it(NAMES.startMcp, async () => {
    const { signal } = checkRun();
    const call = callTool(ctx.client, 'start_kernel', { notebook: ctx.mainPath, kernel: 'jupyter' }, signal, 110_000);
    await ctx.pickKernel();
    const result = await call;
    const started = toolJson(result) as { session: { id: string }; kernel: string };
    ok(!result.isError, `start_kernel failed: ${show(started, 400)}`);
    eq(started.kernel, 'jupyter', 'kernel');
    sid = started.session.id;
  }).timeout(120_000);

  it(NAMES.abandoned, async () => {
    const { signal } = checkRun();
    ok(sid, 'no session from start_kernel');
    const mark = path.join(ctx.workspace, 'abandoned-ran.txt');
    const stream = ctx.client.execute(sid, `open(${JSON.stringify(mark)}, "w").write("ran")`, { signal, timeoutMs: 60_000 });
    ok(await stream.next((e) => e.event === 'stderr' && String(e.data?.data).includes(WAITING), 20_000), 'no waiting line');
    await ctx.dialogShown();
    stream.disconnect();
    await sleep(500);
    await ctx.dialogButton('Allow').click({ timeout: 10_000 });
    await sleep(3000);
    ok(!fs.existsSync(mark), 'the abandoned request ran after Allow');
  }).timeout(60_000);

  it(NAMES.allowed, async () => {
    const { signal } = checkRun();
    const r = await run('print("allowed")', signal);
    eq(expectWellFramed(r).success, true, `success (stderr ${show(r.stderr)})`);
    eq(r.stdout, 'allowed\n', 'stdout');
    ok(!r.stderr.includes(WAITING), 'still waiting for permission');
    eq(await ctx.page.locator('.monaco-dialog-box').count(), 0, 'dialogs open');
  });

  it(NAMES.stdout, async () => {
    const { signal } = checkRun();
    const cell = await ctx.client.post(
      '/notebooks/cells/0/run',
      { notebook: sid, wait: true, timeoutMs: 30_000 },
      { signal, timeoutMs: 40_000 },
    );
    eq(cell.status, 200, `cell run (${show(cell.text, 300)})`);
    const r = await run('print(x)', signal);
    eq(expectWellFramed(r).success, true, `success (stderr ${show(r.stderr)})`);
    eq(r.stdout, '41\n', 'stdout');
  }).timeout(45_000);

  it(NAMES.value, async () => {
    const { signal } = checkRun();
    const done = expectWellFramed(await run('x + 1', signal));
    eq(done.success, true, 'success');
    eq(done.output.mimetype, 'text/plain', 'mimetype');
    eq(done.output.data, '42', 'data');
  });

  it(NAMES.error, async () => {
    const { signal } = checkRun();
    const r = await run('def f():\n    raise ValueError("<b>bad</b>")\nf()', signal);
    eq(expectWellFramed(r).success, false, 'success');
    eq(r.stderr.split('ValueError: <b>bad</b>').length - 1, 1, `the error line appears once in ${show(r.stderr, 600)}`);
    includes(r.stderr, 'raise ValueError("<b>bad</b>")', 'source line with its tag-like text');
    ok(!r.stderr.includes('\u001b['), 'colour codes left');
  });

  it(NAMES.scratchpad, async () => {
    const { signal } = checkRun();
    const probe = 'ip = get_ipython()\n(ip.execution_count, len(In), len(Out), repr(_))';
    const before = expectWellFramed(await run(probe, signal)).output.data;
    eq(expectWellFramed(await run('y_new = 5\nitems = [1]', signal)).success, true, 'binding run');
    const seen = await run('"y_new" in globals(), "items" in globals(), "ip" in globals()', signal);
    eq(expectWellFramed(seen).output.data, '(False, False, False)', 'new names visible afterwards');
    eq(expectWellFramed(await run(probe, signal)).output.data, before, 'execution count, In, Out, _');
  });

  it(NAMES.variables, async () => {
    const { signal } = checkRun();
    const probe =
      'ip = get_ipython()\n(ip.execution_count, len(In), len(Out), repr(_), sorted(k for k in globals() if k.startswith("_agent")))';
    const before = expectWellFramed(await run(probe, signal)).output.data;
    const r = await ctx.client.get(`/notebooks/variables?notebook=${sid}`, { signal, timeoutMs: 40_000 });
    eq(r.status, 200, `GET /notebooks/variables (${show(r.text, 300)})`);
    const x = r.json<{ variables: { name: string; repr?: string; type: string }[] }>().variables.find((v) => v.name === 'x');
    eq(x?.repr, '41', `x in ${show(r.text, 300)}`);
    const one = await ctx.client.get(`/notebooks/variables/x?notebook=${sid}`, { signal, timeoutMs: 40_000 });
    eq(one.json<{ variable: { type: string } }>().variable.type, 'int', `GET /notebooks/variables/x (${show(one.text, 300)})`);
    eq(expectWellFramed(await run(probe, signal)).output.data, before, 'execution count, In, Out, _ and no name left');
  });

  it(NAMES.rich, async () => {
    const { signal } = checkRun();
    const html = expectWellFramed(await run('from IPython.display import display, HTML\ndisplay(HTML("<b>hi</b>"))', signal));
    eq(html.output.mimetype, 'text/html', 'HTML display mimetype');
    eq(html.output.data, '<b>hi</b>', 'HTML display data');
    const png = expectWellFramed(
      await run(
        `import base64\nfrom IPython.display import display, Image\ndisplay(Image(data=base64.b64decode("${PNG_B64}")))`,
        signal,
      ),
    );
    eq(png.output.mimetype, 'image/png', 'PNG display mimetype');
    eq(png.output.data.replace(/\s/g, ''), PNG_B64, 'PNG display data (base64)');
  });

  it(NAMES.cells, async () => {
    const { signal } = checkRun();
    const list = (await ctx.client.get(`/notebooks/cells?notebook=${sid}`, { signal })).json<{
      cells: { id: string; code: string; version: number }[];
    }>();
    eq(list.cells.length, 2, `cells (${show(list.cells.map((c) => c.code))})`);
    const target = list.cells[1]!;
    const code = `import base64\nfrom IPython.display import display, HTML, Image\ndisplay(HTML("<i>rich</i>"))\ndisplay(Image(data=base64.b64decode("${PNG_B64}")))`;
    const edit = await ctx.client.request({
      method: 'PATCH',
      path: `/notebooks/cells/${target.id}`,
      json: { notebook: sid, code },
      signal,
    });
    eq(edit.status, 200, `edit (${show(edit.text, 300)})`);
    const r = await ctx.client.post(
      `/notebooks/cells/${target.id}/run`,
      { notebook: sid, wait: true, timeoutMs: 30_000, outputs: 'full' },
      { signal, timeoutMs: 40_000 },
    );
    eq(r.status, 200, `run (${show(r.text, 300)})`);
    const text = r.text;
    includes(text, 'text/html', 'run outputs');
    includes(text, '<i>rich</i>', 'run outputs');
    includes(text, 'image/png', 'run outputs');
  }).timeout(60_000);

  it(NAMES.runAll, async () => {
    const { signal } = checkRun();
    const codes = ['ran_a = 1', '1 / 0', 'never_b = 2', 'never_c = 3'];
    const made = await ctx.client.post(
      '/notebooks/edits',
      { notebook: sid, ops: codes.map((code) => ({ op: 'create', code })) },
      { signal, timeoutMs: 30_000 },
    );
    eq(made.status, 200, `cells made (${show(made.text, 300)})`);
    type Listed = { cells: { id: string; code: string; execution: { status: string; order: number | null } }[] };
    const listed = async () => (await ctx.client.get(`/notebooks/cells?notebook=${sid}`, { signal })).json<Listed>().cells;
    const all = await listed();
    const cells = codes.map((code) => all.findIndex((c) => c.code === code)).map((index) => ({ index, id: all[index]!.id }));
    const range = { start: cells[0]!.index, end: cells.at(-1)!.index + 1 };
    // Jupyter's queue cancels what waits behind a failure: with "stop" the bridge queues the whole
    // series at once, and with "continue" it cannot go on either.
    for (const onError of ['stop', 'continue']) {
      const r = await ctx.client.post(
        '/notebooks/run',
        { notebook: sid, range, onError, wait: true, timeoutMs: 20_000 },
        { signal, timeoutMs: 40_000 },
      );
      eq(r.status, 200, `${onError}: run (${show(r.text, 400)})`);
      const body = r.json<{ status: string; runs: { status: string }[]; skipped: string[] }>();
      eq(
        show([body.status, body.runs.map((x) => x.status), body.skipped]),
        show(['failed', ['succeeded', 'failed'], [cells[2]!.id, cells[3]!.id]]),
        onError,
      );
      const never = (await listed()).filter((c) => c.id === cells[2]!.id || c.id === cells[3]!.id);
      eq(
        show(never.map((c) => [c.execution.status, c.execution.order])),
        show([
          ['idle', null],
          ['idle', null],
        ]),
        `${onError}: the cancelled cells`,
      );
    }
    eq((await run("print('never_b' in globals())", signal)).stdout, 'False\n', 'the cancelled cells did not run');
    const removed = await ctx.client.post(
      '/notebooks/edits',
      { notebook: sid, ops: cells.map((c) => ({ op: 'delete', ref: c.id })) },
      { signal, timeoutMs: 30_000 },
    );
    eq(removed.status, 200, `cells removed (${show(removed.text, 300)})`);
  }).timeout(120_000);

  it(NAMES.interrupt, async () => {
    const { signal } = checkRun();
    const stream = ctx.client.execute(sid, 'import time\nwhile True:\n    time.sleep(0.05)', { signal, timeoutMs: 30_000 });
    await sleep(1500);
    const r = await ctx.client.post('/notebooks/interrupt', { notebook: sid }, { signal, timeoutMs: 20_000 });
    eq(r.status, 200, `interrupt (${show(r.text)})`);
    const end = await stream.result;
    eq(expectWellFramed(end).success, false, 'interrupted run success');
    // Jupyter's interrupt cancels the pending request, so the run ends with that message
    // rather than the KeyboardInterrupt traceback the builtin kernel shows.
    match(end.stderr, /KeyboardInterrupt|Canceled future for execute_request/, 'interrupted run stderr');
    ok(!end.stderr.includes('refused'), `a refusal hint on an interrupt: ${show(end.stderr)}`);
    eq((await run('print("free")', signal)).stdout, 'free\n', 'next run');
  }).timeout(45_000);

  it(NAMES.disconnect, async () => {
    const { signal } = checkRun();
    const stream = ctx.client.execute(sid, 'import time\nwhile True:\n    time.sleep(0.05)', { signal, timeoutMs: 30_000 });
    await sleep(1000);
    stream.disconnect();
    // The endless loop left going would keep this run queued until its stream gives up.
    const r = await run('print("kernel free")', signal);
    eq(expectWellFramed(r).success, true, `follow-up success (stderr ${show(r.stderr)})`);
    eq(r.stdout, 'kernel free\n', 'follow-up stdout');
  }).timeout(45_000);

  it(NAMES.restart, async () => {
    const { signal } = checkRun();
    const pending = ctx.client.post('/notebooks/restart', { notebook: sid }, { signal, timeoutMs: 80_000 });
    // Jupyter asks the person to confirm (jupyter.askForKernelRestart is on by default).
    await ctx.sandbox.waitFor("Jupyter's restart confirmation", () => ctx.dialogButton('Restart').isVisible(), 20_000);
    await ctx.dialogButton('Restart').click();
    const r = await pending;
    eq(r.status, 200, `restart (${show(r.text)})`);
    const after = expectWellFramed(await run('"x" in globals()', signal, sid, 30_000));
    eq(after.output.data, 'False', 'x after the restart');
    const sessions = (await ctx.client.get('/api/sessions', { signal })).json<Record<string, unknown>>();
    ok(sid in sessions, 'the session is gone after the restart');
  }).timeout(120_000);

  it(NAMES.mcp, async () => {
    const { signal } = checkRun();
    const ok1 = (await callTool(ctx.client, 'execute_code', { session_id: sid, code: 'print("hi")\n6 * 7' }, signal))
      .structuredContent!;
    eq(ok1['success'], true, `success (${show(ok1, 300)})`);
    eq((ok1['stdout'] as string[]).join(''), 'hi\n', 'stdout');
    eq(ok1['output'], '42', 'output');
    const bad = (await callTool(ctx.client, 'execute_code', { session_id: sid, code: '1/0' }, signal)).structuredContent!;
    eq(bad['success'], false, 'error success');
    match((bad['stderr'] as string[]).join(''), /ZeroDivisionError/, 'error stderr');
  });

  it(NAMES.server, async () => {
    const { signal, note } = checkRun();
    const server = await startJupyterServer(ctx);
    try {
      const serverPath = path.join(ctx.workspace, 'jupyter-server.ipynb');
      const opened = await ctx.client.post('/notebooks/open', { path: serverPath }, { signal, timeoutMs: 30_000 });
      eq(opened.status, 200, `open (${show(opened.text)})`);
      const serverSid = opened.json<{ session: { id: string } }>().session.id;
      // As the person: the kernel picker, "Existing Jupyter Server...", its URL, a name, the kernel.
      // Jupyter pre-fills the URL box from the clipboard, which needs the browser's permission.
      await ctx.page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
      await ctx.page.keyboard.press('F1');
      await ctx.page.keyboard.type('Notebook: Select Notebook Kernel');
      await ctx.page
        .locator('.quick-input-widget .monaco-list-row', { hasText: 'Notebook: Select Notebook Kernel' })
        .first()
        .click();
      // A notebook with a suggested kernel lists it first, the kernel sources one level down.
      const existing = ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Existing Jupyter Server' });
      const another = ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Select Another Kernel' });
      await existing.or(another).first().waitFor({ timeout: 20_000 });
      if (await another.isVisible()) await another.click();
      await existing.click({ timeout: 20_000 });
      await ctx.page
        .locator('.quick-input-widget', { hasText: 'Enter the URL of the running Jupyter Server' })
        .waitFor({ timeout: 20_000 });
      await ctx.page.keyboard.type(`${server.url}/?token=${server.token}`);
      await ctx.page.keyboard.press('Enter');
      await ctx.page.locator('.quick-input-widget', { hasText: 'Change Server Display Name' }).waitFor({ timeout: 20_000 });
      await ctx.page.keyboard.press('Enter');
      await ctx.page.locator('.quick-input-widget .monaco-list-row', { hasText: 'Python 3' }).first().click({ timeout: 30_000 });
      // Run All starts the kernel. From the command palette: the toolbar's button hides in an
      // overflow menu when the editor is narrow (the activity view is open beside it).
      await ctx.page.keyboard.press('F1');
      await ctx.page.keyboard.type('Notebook: Run All');
      await ctx.page.locator('.quick-input-widget').getByText('Notebook: Run All', { exact: true }).first().click();
      await ctx.sandbox.waitFor(
        'the server kernel in /api/sessions',
        async () => serverSid in (await ctx.client.get('/api/sessions', { signal })).json<Record<string, unknown>>(),
        60_000,
      );
      // The kernel's connection file is in the server's runtime folder: the server launched it.
      const code = 'from ipykernel import get_connection_file\nprint(get_connection_file())\n6 * 7';
      const stream = ctx.client.execute(serverSid, code, {
        signal,
        timeoutMs: 40_000,
      });
      // Run alone (--only), this is the bridge's first request: answer Jupyter's consent dialog.
      if (await stream.next((e) => e.event === 'stderr' && String(e.data?.data).includes(WAITING), 3000).catch(() => undefined))
        await ctx.dialogButton('Allow').click({ timeout: 10_000 });
      const r = await stream.result;
      const done = expectWellFramed(r);
      eq(done.success, true, `success (stderr ${show(r.stderr, 600)})`);
      ok(
        // The server names it by its real path (the stack folder may be reached through a link).
        r.stdout.startsWith(path.join(fs.realpathSync(server.runtime), 'kernel-')),
        `connection file ${show(r.stdout)}, not in ${server.runtime}`,
      );
      eq(done.output.data, '42', 'value');
      const kernels = (await (await fetch(`${server.url}/api/kernels?token=${server.token}`)).json()) as { id: string }[];
      eq(kernels.length, 1, 'kernels running on the Jupyter Server');
      note(`kernel ${kernels[0]!.id} on ${server.url}: ${r.stdout.trim()}`);
    } finally {
      server.stop();
    }
  }).timeout(150_000);

  const scripts = scriptsDir();
  const execute = scripts && path.join(scripts, 'execute-code.sh');
  if (!execute || !fs.existsSync(execute))
    skipped([NAMES.script], scripts ? `no execute-code.sh in ${scripts}` : 'MARIMO_PAIR_SCRIPTS is not set');
  else
    it(NAMES.script, async () => {
      const { signal } = checkRun();
      const env: NodeJS.ProcessEnv = { ...process.env, MARIMO_TOKEN: ctx.advert.token ?? '' };
      delete env[MARKER_VAR];
      const good = await runScript(
        execute,
        ['--url', ctx.advert.url, '--file', ctx.mainPath, '-c', 'print("via script")\n6 * 7'],
        {
          env,
          signal,
          timeoutMs: 30_000,
        },
      );
      eq(good.code, 0, `exit code (stderr ${show(good.stderr)})`);
      eq(good.stdout, 'via script\n42\n', 'stdout');
      const bad = await runScript(execute, ['--url', ctx.advert.url, '--file', ctx.mainPath, '-c', '1/0'], {
        env,
        signal,
        timeoutMs: 30_000,
      });
      eq(bad.code, 1, 'exit code on error');
      includes(bad.stderr, 'ZeroDivisionError', 'stderr on error');
    });
}

/**
 * Debian's Jupyter Server on 127.0.0.1 with a token, its HOME and runtime files in the sandbox.
 * Stopped (its process group) by the returned function.
 */
async function startJupyterServer(ctx: CheckContext): Promise<{ url: string; token: string; runtime: string; stop: () => void }> {
  const port = await new Promise<number>((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
  const token = randomHex(16);
  const home = path.join(ctx.sandbox.root, 'jupyter-server');
  const runtime = path.join(home, 'runtime');
  fs.mkdirSync(home, { recursive: true });
  const server = spawn(
    STACK.venvPython,
    [
      '-m',
      'jupyter_server',
      '--no-browser',
      '--allow-root',
      '--ip=127.0.0.1',
      `--port=${port}`,
      `--ServerApp.token=${token}`,
      `--ServerApp.root_dir=${ctx.workspace}`,
    ],
    {
      env: { ...process.env, HOME: home, JUPYTER_RUNTIME_DIR: runtime, [MARKER_VAR]: ctx.sandbox.id },
      detached: true,
      stdio: 'ignore',
    },
  );
  const stop = () => {
    try {
      process.kill(-server.pid!, 'SIGTERM');
    } catch {
      /* already gone */
    }
  };
  const url = `http://127.0.0.1:${port}`;
  try {
    await ctx.sandbox.waitFor('the Jupyter Server', async () => (await fetch(`${url}/api/status?token=${token}`)).ok, 30_000);
  } catch (error) {
    stop();
    throw error;
  }
  return { url, token, runtime, stop };
}

/** The bridge's output channel as VS Code writes it to the sandbox's logs. */
export function bridgeLog(ctx: Pick<CheckContext, 'sandbox'>): string {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.name.endsWith('Agent Bridge.log')) found.push(full);
    }
  };
  walk(path.join(ctx.sandbox.dirs.userData, 'logs'));
  return found.map((f) => fs.readFileSync(f, 'utf8')).join('\n');
}
