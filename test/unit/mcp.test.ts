import { strict as assert } from 'node:assert';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { EXECUTE_OUTPUT_CAP } from '../../src/mcp/tools';
import { SCRATCHPAD_OUTPUT_CAP } from '../../src/core/outputs/outputCap';
import type { RunningServer } from '../../src/server/app';
import { request } from './fakes/http';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { FakeNotebooks, NOTEBOOK_A, PNG_BYTES } from './fakes/notebooks';
import { sleep } from '../../src/core/sleep';

const TOKEN = TEST_TOKEN;
const done = (data = '') => ({ success: true, status: 'succeeded' as const, output: { mimetype: 'text/plain', data } });
const A = NOTEBOOK_A;
const PNG = PNG_BYTES;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- structured results are read loosely
type Json = any;

describe('MCP over Streamable HTTP (SDK client, fake notebooks)', () => {
  let server: RunningServer;
  let port = 0;
  let kernel: FakeKernel;
  let docs: FakeNotebooks;
  let clients: Client[];

  const url = () => new URL(`http://127.0.0.1:${port}/mcp/server`);
  async function connect(headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` }): Promise<Client> {
    const client = new Client({ name: 'mcp-test', version: '0.0.0' });
    clients.push(client);
    await client.connect(new StreamableHTTPClientTransport(url(), { requestInit: { headers } }));
    return client;
  }
  /** A tool's result, with `body`: its JSON (structured content, else the JSON of its first text part). */
  async function call(
    name: string,
    args: Record<string, unknown> = {},
  ): Promise<CallToolResult & { structuredContent?: Json; body: Json }> {
    const client = clients[0] ?? (await connect());
    const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
    const text = (result.content[0] as { text?: string } | undefined)?.text ?? '';
    return { ...result, body: result.structuredContent ?? (text.startsWith('{') ? JSON.parse(text) : undefined) };
  }

  /** `tools/list` as a raw POST: its status, headers and event-stream body. */
  const toolsListRaw = () =>
    request(port, {
      method: 'POST',
      path: '/mcp/server',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });

  beforeEach(async () => {
    clients = [];
    kernel = new FakeKernel({
      'print(2 + 2)': { steps: [{ name: 'stdout', text: '4\n' }], result: done() },
      '1 + 1': { steps: [], result: done('2') },
      raise: {
        steps: [{ name: 'stderr', text: 'Traceback (most recent call last):\n  File "<cell>", line 1\nValueError: x\n' }],
        result: { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } },
      },
      slow: { steps: [{ name: 'stdout', text: 'a' }, { waitMs: 150 }, { name: 'stdout', text: 'b' }], result: done() },
      forever: { steps: [{ name: 'stdout', text: 'started\n' }, { waitForAbort: true }], result: done() },
      // 1,000,000 lines (7.9 MB) on stdout, then a traceback on stderr.
      flood: {
        steps: [
          ...Array.from({ length: 1000 }, (_, i) => ({ name: 'stdout' as const, text: `line ${i}\n`.repeat(1000) })),
          { name: 'stderr', text: 'Traceback...\nMemoryError: x\n' },
        ],
        result: { success: false, status: 'failed', output: { mimetype: 'text/plain', data: 'v'.repeat(300_000) } },
      },
    });
    const host = new FakeNotebookHost([
      { info: { id: 's_aaaaaa', path: '/work/a.ipynb', uri: 'file:///work/a.ipynb', notebookType: 'jupyter-notebook' }, kernel },
      { info: { id: 's_bbbbbb', path: null, uri: 'untitled:Untitled-1.ipynb', notebookType: 'jupyter-notebook' }, kernel },
    ]);
    docs = new FakeNotebooks({
      'plot()': { steps: [{ stdout: 'drawing\n' }, { display: { mime: 'image/png', data: PNG } }] },
      // A kernel that re-runs a dependent itself, as marimo's does.
      'x = 5': { steps: [], rerun: ['print(x)'] },
      'print(x)': { steps: [{ stdout: '5\n' }] },
    });
    docs.add(A, [{ code: 'x = 1' }, { code: '' }]);
    server = await startTestServer({ host, notebooks: docs });
    port = server.port;
  });
  afterEach(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await server.close();
  });

  describe('tools', () => {
    it("lists marimo's two tools and the cell tools, with input schemas", async () => {
      const client = await connect();
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name).sort();
      for (const name of [
        'list_sessions',
        'execute_code',
        'list_notebooks',
        'list_cells',
        'get_cell',
        'create_cell',
        'edit_cell',
        'delete_cell',
        'move_cell',
        'run_cell',
        'edit_cells',
        'interrupt',
        'restart_kernel',
        'run_cells',
        'clear_outputs',
        'save_notebook',
      ]) {
        assert.ok(names.includes(name), `missing ${name} in ${names.join(', ')}`);
      }
      const execute = tools.find((t) => t.name === 'execute_code')!;
      assert.deepEqual(execute.inputSchema.required, ['session_id', 'code']);
      assert.ok(execute.outputSchema, 'execute_code declares its result shape');
      const edit = tools.find((t) => t.name === 'edit_cell')!;
      assert.deepEqual([...(edit.inputSchema.required ?? [])].sort(), ['ref']);
    });

    it('tools/list takes at most 12 KB (the long text is in the skill)', async () => {
      const res = await toolsListRaw();
      assert.equal(res.status, 200);
      const data = res.body
        .split('\n')
        .find((l) => l.startsWith('data: '))!
        .slice(6);
      const bytes = Buffer.byteLength(data);
      assert.ok(bytes <= 12 * 1024, `tools/list is ${bytes} bytes`);
    });

    it('list_sessions names each notebook by file name, path and session id', async () => {
      const result = await call('list_sessions');
      assert.deepEqual(result.structuredContent, {
        sessions: [
          { name: 'a.ipynb', path: '/work/a.ipynb', session_id: 's_aaaaaa' },
          { name: 'Untitled-1.ipynb', path: 'untitled:Untitled-1.ipynb', session_id: 's_bbbbbb' },
        ],
      });
      assert.deepEqual(JSON.parse((result.content[0] as { text: string }).text), result.structuredContent);
    });
  });

  describe('execute_code', () => {
    it('collects stdout and returns the trailing value as output', async () => {
      const printed = await call('execute_code', { session_id: 's_aaaaaa', code: 'print(2 + 2)' });
      assert.deepEqual(printed.structuredContent, {
        success: true,
        output: null,
        stdout: ['4\n'],
        stderr: [],
        errors: [],
        error: null,
      });
      const value = await call('execute_code', { session_id: 's_aaaaaa', code: '1 + 1' });
      assert.equal(value.structuredContent.output, '2');
      assert.equal(value.isError, undefined);
    });

    it('caps huge output as HTTP does: head and tail, a note with the url of the whole, which serves it', async () => {
      const result = await call('execute_code', { session_id: 's_aaaaaa', code: 'flood' });
      const content = result.structuredContent as { stdout: string[]; stderr: string[]; output: string; errors: string[] };
      const stdout = content.stdout.join('');
      const stderr = content.stderr.join('');
      assert.ok(stdout.length <= SCRATCHPAD_OUTPUT_CAP, `${stdout.length} characters of stdout`);
      assert.ok(stdout.startsWith('line 0\nline 0\n'));
      assert.ok(stdout.endsWith('line 999\n'));
      const note =
        /\[agent-bridge: (\d+) characters cut here, after character \d+; the whole output \((\d+) characters\) is at (http:\/\/127\.0\.0\.1:\d+\/notebooks\/scratchpad\/outputs\/[\w-]+) for \d+ minutes/.exec(
          stderr,
        );
      assert.ok(note, stderr.slice(0, 400));
      const whole = await request(port, { path: new URL(note[3]!).pathname, headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(whole.status, 200);
      assert.equal(whole.body.length, Number(note[2]));
      assert.ok(whole.body.startsWith('line 0\n') && whole.body.includes('MemoryError: x'));
      assert.ok(content.output.length < EXECUTE_OUTPUT_CAP + 200);
      assert.deepEqual(content.errors, ['MemoryError: x']);
    });
    it('reports a failure with its traceback on stderr, the exception in errors and success false', async () => {
      const result = await call('execute_code', { session_id: 's_aaaaaa', code: 'raise' });
      assert.equal(result.structuredContent.success, false);
      assert.match(result.structuredContent.stderr.join(''), /Traceback/);
      assert.deepEqual(result.structuredContent.errors, ['ValueError: x']);
      assert.equal(result.structuredContent.error, null);
    });

    it('answers an unknown session with success false and an error naming list_sessions, as a tool error', async () => {
      const result = await call('execute_code', { session_id: 's_nothere', code: '1 + 1' });
      assert.equal(result.isError, true);
      assert.equal(result.structuredContent.success, false);
      assert.match(result.structuredContent.error, /s_nothere.*list_sessions/);
      assert.equal(kernel.calls.length, 0);
    });

    it('interrupts a run that outlives its wait and says so', async () => {
      const result = await call('execute_code', { session_id: 's_aaaaaa', code: 'forever', timeout_seconds: 0.2 });
      assert.equal(result.structuredContent.success, false);
      assert.match(result.structuredContent.error, /timed out after 0\.2s and was interrupted/);
      assert.equal(result.isError, undefined, 'a run stopped at its time limit is reported, not a tool error');
      assert.deepEqual(result.structuredContent.stdout, ['started\n']);
      assert.equal(kernel.calls[0]!.aborted, true);
    });

    it('gives up at once when its wait ends while still queued behind another run', async () => {
      const ahead = new AbortController();
      let aheadEnded = false;
      const http = request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'marimo-session-id': 's_aaaaaa' },
        body: JSON.stringify({ code: 'forever' }),
        signal: ahead.signal,
      }).finally(() => (aheadEnded = true));
      await sleep(30);
      const result = await call('execute_code', { session_id: 's_aaaaaa', code: '1 + 1', timeout_seconds: 0.2 });
      assert.equal(aheadEnded, false, 'answered while the run ahead of it still goes on');
      assert.match(result.structuredContent.error, /timed out after 0\.2s before it started/);
      ahead.abort();
      await http.catch(() => undefined);
      await sleep(50);
      assert.deepEqual(
        kernel.calls.map((c) => c.code),
        ['forever'],
        'the dropped run never reached the kernel',
      );
    });

    it('takes its turn in the same per-session queue as HTTP execute', async () => {
      const http = request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'marimo-session-id': 's_aaaaaa' },
        body: JSON.stringify({ code: 'slow' }),
      });
      await sleep(30);
      const mcp = await call('execute_code', { session_id: 's_aaaaaa', code: 'print(2 + 2)' });
      await http;
      assert.equal(mcp.structuredContent.success, true);
      const [first, second] = kernel.calls;
      assert.deepEqual([first!.code, second!.code], ['slow', 'print(2 + 2)']);
      assert.ok(second!.started >= first!.ended, 'the MCP run started only after the HTTP run ended');
    });
  });

  describe('cell tools', () => {
    it('refuses to edit an unread non-empty cell (read-before-write) as a tool error with the current cell', async () => {
      const refused = await call('edit_cell', { ref: 0, code: 'x = 2' });
      assert.equal(refused.isError, true);
      assert.match((refused.content[0] as { text: string }).text, /has not been read/);
      assert.equal(refused.body.status, 409);
      assert.equal(refused.body.cell.code, 'x = 1');
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '']);

      await call('get_cell', { ref: 0 });
      const edited = await call('edit_cell', { ref: 0, code: 'x = 2' });
      assert.equal(edited.isError, undefined);
      assert.equal(edited.body.cell.code, 'x = 2');
      assert.deepEqual(docs.codes(A.uri), ['x = 2', '']);
    });

    it('list_notebooks says where each kernel is', async () => {
      const { body } = await call('list_notebooks');
      assert.deepEqual(
        body.notebooks.map((n: Json) => [n.sessionId, n.kernel, n.kernelState]),
        [['s_aaaaaa', 'builtin', 'idle']],
      );
    });

    it('rejects invalid arguments with the shared schemas (strict: no unknown keys)', async () => {
      const result = await call('edit_cell', { ref: 0, code: 'x = 2', forse: true });
      assert.equal(result.isError, true);
      // The same words as the HTTP 400: the unknown key and the keys allowed there.
      assert.match(
        (result.content[0] as { text: string }).text,
        /Unrecognized key: "forse" \(allowed: notebook, strict, code, kind, language, metadata, tags, version, force, ref\)/,
      );
      const op = await call('edit_cells', { ops: [{ op: 'delete', ref: 0, code: 'x' }] });
      assert.match((op.content[0] as { text: string }).text, /Unrecognized key: "code" \(allowed: op, ref, version, force\)/);
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '']);
    });

    it('runs a cell and waits: outputs in the JSON; the image as image content only when asked', async () => {
      const created = await call('create_cell', { code: 'plot()' });
      const result = await call('run_cell', { ref: created.body.cell.id, outputs: 'full' });
      assert.equal(result.isError, undefined);
      assert.equal(result.body.done, true);
      assert.equal(result.body.success, true);
      const items = result.body.cell.outputs.flatMap((o: Json) => o.items);
      assert.equal(items[0].text, 'drawing\n');
      assert.equal(items[1].type, 'image/png');
      assert.ok(items[1].url && items[1].text === undefined, 'the JSON points at the image, it does not carry it');
      assert.deepEqual(
        result.content.map((c) => c.type),
        ['text'],
        'no image unless asked',
      );
      const asked = await call('run_cell', { ref: created.body.cell.id, images: true });
      const images = asked.content.filter((c) => c.type === 'image');
      assert.deepEqual(images, [{ type: 'image', mimeType: 'image/png', data: Buffer.from(PNG).toString('base64') }]);
    });

    it('get_cell answers as GET /notebooks/cells/{id} does (full, images by url); get_output reads the image alone', async () => {
      const created = await call('create_cell', { code: 'plot()' });
      await call('run_cell', { ref: created.body.cell.id });
      const got = await call('get_cell', { ref: created.body.cell.id });
      const http = await request(port, {
        path: `/notebooks/cells/${created.body.cell.id}?notebook=${A.sessionId}`,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.deepEqual(got.body, JSON.parse(http.body));
      assert.deepEqual(
        got.content.map((c) => c.type),
        ['text'],
      );
      const url = got.body.cell.outputs[1].items[0].url;
      const image = await call('get_output', { url });
      assert.deepEqual(image.body, { item: { type: 'image/png', bytes: PNG.length } });
      assert.deepEqual(image.content[1], { type: 'image', mimeType: 'image/png', data: Buffer.from(PNG).toString('base64') });
      const text = await call('get_output', { url: url.replace('/outputs/1/0', '/outputs/0/0') });
      assert.deepEqual(text.body, { item: { type: 'stdout', text: 'drawing\n', bytes: 8 } });
      const bad = await call('get_output', { url: '/notebooks/cells' });
      assert.equal(bad.isError, true);
      assert.match(JSON.stringify(bad.content), /is not an output url/);
    });

    it('list_cells view "brief" is the compact list of GET /notebooks/cells?view=brief', async () => {
      const brief = await call('list_cells', { view: 'brief' });
      assert.deepEqual(
        brief.body.cells.map((c: Json) => Object.keys(c).sort().join()),
        ['id,index,kind,line,status', 'id,index,kind,line,status'],
      );
      const refused = await call('list_cells', { view: 'brief', outputs: 'full' });
      assert.equal(refused.isError, true);
    });

    it('applies a batch as one edit and runs what it names; the run cell is in "cells" once', async () => {
      const result = await call('edit_cells', {
        ops: [
          { op: 'edit', ref: 1, code: 'plot()' },
          { op: 'create', code: '# notes', kind: 'markup' },
        ],
        run: [1],
        outputs: 'full',
      });
      assert.equal(result.isError, undefined, JSON.stringify(result.content));
      assert.equal(result.body.cellCount, 3);
      assert.equal(result.body.runs[0].success, true);
      assert.equal(result.body.runs[0].cell, undefined, 'the run names its cell, which "cells" carries');
      assert.equal(result.body.runs[0].cellId, result.body.cells[0].id);
      assert.equal(result.body.cells[0].outputs[1].items[0].type, 'image/png');
      assert.equal(docs.calls.filter((c) => c.method === 'apply').length, 1);
      assert.equal(result.content.filter((c) => c.type === 'image').length, 0);
    });

    it('answers once, as JSON text (no structured copy); summaries by default, without images', async () => {
      const created = await call('create_cell', { code: 'plot()' });
      const result = await call('run_cell', { ref: created.body.cell.id });
      assert.equal(result.structuredContent, undefined);
      assert.deepEqual(
        result.content.map((c) => c.type),
        ['text'],
      );
      const [stdout, image] = result.body.cell.outputs.flatMap((o: Json) => o.items);
      assert.deepEqual(stdout, { type: 'stdout', text: 'drawing\n', bytes: 8 });
      assert.equal(image.type, 'image/png');
      assert.ok(image.url, 'a summarized image keeps its url');
      const listed = await call('list_cells', { outputs: 'none' });
      assert.equal(listed.body.cells[2].outputs, undefined);
    });

    it('run_cell answers with the cells the kernel re-ran on its own (alsoRan), summarized like the cell', async () => {
      await call('edit_cells', {
        ops: [
          { op: 'edit', ref: 0, code: 'x = 5', force: true },
          { op: 'edit', ref: 1, code: 'print(x)' },
        ],
      });
      const result = await call('run_cell', { ref: 0 });
      assert.equal(result.isError, undefined, JSON.stringify(result.content));
      assert.deepEqual(
        result.body.alsoRan.map((r: Json) => [r.done, r.status, r.cell.index, r.cell.outputs]),
        [[true, 'succeeded', 1, [{ items: [{ type: 'stdout', text: '5\n', bytes: 2 }] }]]],
      );
    });

    it("undo_last_change takes back the caller's own newest change, and says so when there is none", async () => {
      const edited = await call('edit_cells', {
        ops: [
          { op: 'edit', ref: 1, code: 'y = 2' },
          { op: 'create', code: 'z = 3' },
        ],
      });
      assert.equal(edited.isError, undefined, JSON.stringify(edited.content));
      const undone = await call('undo_last_change');
      assert.equal(undone.isError, undefined, JSON.stringify(undone.content));
      assert.equal(undone.body.summary, '1 added, 1 edited');
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '']);
      const none = await call('undo_last_change');
      assert.equal(none.isError, true);
      assert.equal(none.body.status, 404);
    });

    it("list_changes lists the session's own changes, newest first; undo_last_change takes back the one named, and another session none", async () => {
      await call('create_cell', { code: 'first = 1' });
      await call('create_cell', { code: 'second = 2' });
      const listed = await call('list_changes');
      assert.deepEqual(
        listed.body.changes.map((c: Json) => [c.summary, c.undoable]),
        [
          ['1 added', true],
          ['1 added', true],
        ],
      );
      const other = await connect();
      const theirs = (await other.callTool({ name: 'list_changes', arguments: {} })) as CallToolResult;
      assert.deepEqual(JSON.parse((theirs.content[0] as { text: string }).text).changes, [], 'another session lists none');
      const stolen = (await other.callTool({
        name: 'undo_last_change',
        arguments: { checkpoint: listed.body.changes[1].id },
      })) as CallToolResult;
      assert.equal(stolen.isError, true, 'another session cannot undo it');
      const undone = await call('undo_last_change', { checkpoint: listed.body.changes[1].id });
      assert.equal(undone.isError, undefined, JSON.stringify(undone.content));
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '', 'second = 2']);
    });

    it('surfaces service errors (404 unknown cell) as tool errors', async () => {
      const result = await call('get_cell', { ref: 'nope' });
      assert.equal(result.isError, true);
      assert.equal(result.body.status, 404);
    });
  });

  describe('transport and security', () => {
    it('is stateless: no session id, and GET/DELETE answer 405 JSON', async () => {
      const client = await connect();
      await client.listTools();
      for (const method of ['GET', 'DELETE']) {
        const res = await request(port, {
          method,
          path: '/mcp/server',
          headers: { authorization: `Bearer ${TOKEN}`, accept: 'text/event-stream' },
        });
        assert.equal(res.status, 405);
        assert.equal(res.headers['allow'], 'POST');
        assert.match(JSON.parse(res.body).detail, /stateless/);
      }
    });

    it('replies to a POST as an event stream', async () => {
      const res = await toolsListRaw();
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /^text\/event-stream/);
      assert.equal(res.headers['mcp-session-id'], undefined);
      assert.match(res.body, /"list_sessions"/);
    });

    const initialize = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    });
    const raw = (headers: Record<string, string>) =>
      request(port, {
        method: 'POST',
        path: '/mcp/server',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: initialize,
      });

    it('401 without the token', async () => {
      await assert.rejects(connect({}), /Authorization header required/);
      assert.equal((await raw({})).status, 401);
    });

    it('403 for a foreign Origin, even with the token', async () => {
      const headers = { authorization: `Bearer ${TOKEN}`, origin: 'https://evil.example' };
      await assert.rejects(connect(headers), /Origin 'https:\/\/evil.example' is not allowed/);
      assert.equal((await raw(headers)).status, 403);
    });

    it('421 for a forged Host (raw HTTP)', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/mcp/server',
        headers: {
          host: 'evil.example:80',
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      assert.equal(res.status, 421);
    });

    it('415 for a body that is not JSON', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/mcp/server',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain' },
        body: '{}',
      });
      assert.equal(res.status, 415);
    });
  });
});
