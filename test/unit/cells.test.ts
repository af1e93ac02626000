import { MAX_BATCH_OPS } from '../../src/core/cells/batch';
import { strict as assert } from 'node:assert';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import type { RunningServer } from '../../src/server/app';
import { request } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A, PNG_BYTES } from './fakes/notebooks';

const TOKEN = TEST_TOKEN;
const A = NOTEBOOK_A;
const B = {
  sessionId: 's_bbbbbb',
  uri: 'untitled:Untitled-1.ipynb',
  path: null,
  notebookType: 'jupyter-notebook',
  kernel: null,
  kernelUnavailable: 'no kernel is selected',
  idsPersist: false,
};
const PNG = PNG_BYTES;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test bodies are read loosely
type Json = any;

describe('cell routes (fake notebooks)', () => {
  let server: RunningServer;
  let port = 0;
  let docs: FakeNotebooks;
  /** The person's answers to the bridge's questions, in order, and the questions put. */
  let answers: ('yes' | 'no' | 'no-answer')[];
  let questions: string[];
  let ids: string[];

  async function api(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: Json; raw: string; type: string }> {
    const res = await request(port, {
      method,
      path,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    let parsed: Json;
    try {
      parsed = JSON.parse(res.body);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, raw: res.body, type: String(res.headers['content-type']) };
  }
  const q = (path: string, notebook = 's_aaaaaa') =>
    `${path}${path.includes('?') ? '&' : '?'}notebook=${encodeURIComponent(notebook)}`;
  const list = async (notebook = 's_aaaaaa') => (await api('GET', q('/notebooks/cells', notebook))).body.cells as Json[];

  beforeEach(async () => {
    docs = new FakeNotebooks({
      'print("hi")': { steps: [{ stdout: 'h' }, { waitMs: 20 }, { stdout: 'i\n' }] },
      'boom()': {
        steps: [
          { stdout: 'before\n' },
          {
            error: {
              name: 'NameError',
              message: "name 'boom' is not defined",
              traceback: 'Traceback (most recent call last):\nNameError: boom',
            },
          },
        ],
      },
      'sleep()': { steps: [{ waitMs: 400 }] },
      // A kernel that re-runs a cell's dependents itself, as marimo's does.
      'x = 2': { steps: [], rerun: ['w = x * 2'] },
      'w = x * 2': { steps: [{ waitMs: 30 }, { stdout: 'w is 4\n' }] },
      'x = 3': { steps: [], rerun: ['slow()'] },
      'slow()': { steps: [{ waitMs: 400 }] },
      'page()': { steps: [{ display: { mime: 'text/html', data: '<script>fetch("/api/sessions")</script>' } }] },
      'plot()': {
        steps: [{ display: { mime: 'image/png', data: PNG } }, { display: { mime: 'text/plain', data: 'y'.repeat(300) } }],
      },
    });
    ids = docs.add(A, [
      { code: 'x = 1' },
      { kind: 'markup', code: '# Title' },
      { code: '' },
      { code: 'y = x + 1', outputs: [{ items: [{ mime: 'text/plain', data: new TextEncoder().encode('2') }] }] },
    ]);
    docs.add(B, [{ code: 'z = 3' }]);
    answers = [];
    questions = [];
    server = await startTestServer({
      notebooks: docs,
      confirm: (q) => {
        questions.push(q.message);
        return Promise.resolve(answers.shift() ?? 'no');
      },
    });
    port = server.port;
  });
  afterEach(() => server.close());

  describe('reading', () => {
    it('GET /notebooks lists every open notebook with its kernel, cell count and dirty flag', async () => {
      const res = await api('GET', '/notebooks');
      assert.equal(res.status, 200);
      const { idsNote, ...b } = res.body.notebooks[1];
      assert.deepEqual(res.body.notebooks, [
        { ...A, kernelState: 'idle', cellCount: 4, dirty: false },
        { ...b, idsNote },
      ]);
      assert.deepEqual(b, { ...B, kernelState: null, cellCount: 1, dirty: false });
      assert.match(idsNote, /nbformat < 4\.5 keeps no cell ids.*POST \/notebooks\/persist-ids/);
    });

    it('POST /notebooks/persist-ids asks the person: "Upgrade" keeps the ids in the file, no is a 403 and changes nothing', async () => {
      answers.push('no', 'no-answer', 'yes');
      const refused = await api('POST', '/notebooks/persist-ids', { notebook: B.sessionId });
      assert.equal(refused.status, 403, refused.raw);
      assert.match(refused.body.detail, /declined to upgrade untitled:Untitled-1\.ipynb/);
      assert.match(questions[0]!, /asks to upgrade untitled:Untitled-1\.ipynb to nbformat 4\.5/);
      assert.match(
        (await api('POST', '/notebooks/persist-ids', { notebook: B.sessionId })).body.detail,
        /did not answer in time/,
      );
      assert.equal(docs.calls.filter((c) => c.method === 'persistIds').length, 0);
      const upgraded = await api('POST', '/notebooks/persist-ids', { notebook: B.sessionId });
      assert.equal(upgraded.status, 200, upgraded.raw);
      assert.deepEqual(
        [upgraded.body.upgraded, upgraded.body.notebook.idsPersist, upgraded.body.notebook.idsNote],
        [true, true, undefined],
      );
      // Kept already: nothing asked, nothing changed.
      const again = await api('POST', '/notebooks/persist-ids', { notebook: A.sessionId });
      assert.deepEqual([again.status, again.body.upgraded], [200, false]);
      assert.equal(questions.length, 3);
    });

    it('every notebook view says whether its ids last, and when not, why and what to do', async () => {
      const views = async (notebook: string) => [
        (await api('GET', '/notebooks')).body.notebooks.find((n: Json) => n.sessionId === notebook),
        ...(await Promise.all(
          ['', '?outputs=none', '?outputs=full', '?view=brief'].map(
            async (query) => (await api('GET', q(`/notebooks/cells${query}`, notebook))).body.notebook,
          ),
        )),
      ];
      for (const view of await views(A.sessionId)) assert.deepEqual([view.idsPersist, view.idsNote], [true, undefined]);
      for (const view of await views(B.sessionId)) {
        assert.equal(view.idsPersist, false);
        assert.match(view.idsNote, /nbformat < 4\.5 keeps no cell ids.*POST \/notebooks\/persist-ids/);
      }
    });

    it("GET /notebooks says where each kernel is, and why when the kernel's API cannot tell", async () => {
      docs.kernelStatus(A.uri, { state: 'unknown', note: 'marimo reports every kernel as idle' });
      const [a] = (await api('GET', '/notebooks')).body.notebooks;
      assert.equal(a.kernelState, 'unknown');
      assert.equal(a.kernelStateNote, 'marimo reports every kernel as idle');
      docs.kernelStatus(A.uri, { state: 'busy', startedAt: Date.now() });
      assert.equal((await api('GET', '/notebooks')).body.notebooks[0].kernelState, 'busy');
    });

    it('GET /notebooks/active: null without an editor, else the selected cells by id', async () => {
      assert.deepEqual((await api('GET', '/notebooks/active')).body, {
        notebook: null,
        selections: [],
        selectedCells: [],
        visibleRanges: [],
      });
      docs.activeEditor = { uri: A.uri, selections: [{ start: 1, end: 3 }], visibleRanges: [{ start: 0, end: 4 }] };
      const res = await api('GET', '/notebooks/active');
      assert.equal(res.body.notebook.sessionId, 's_aaaaaa');
      assert.deepEqual(res.body.selectedCells, [
        { id: ids[1], index: 1 },
        { id: ids[2], index: 2 },
      ]);
      assert.deepEqual(res.body.visibleRanges, [{ start: 0, end: 4 }]);
    });

    it('a cell not run in the current kernel shows its count as saved, not as a run; a restart makes every cell so', async () => {
      const saved = docs.add({ ...A, sessionId: 's_cccccc', uri: 'file:///work/c.ipynb', path: '/work/c.ipynb' }, [
        { code: 'x = 1', savedOrder: 7 },
        { code: 'y = 2' },
      ]);
      const list = async () => (await api('GET', '/notebooks/cells?notebook=s_cccccc')).body.cells;
      const [fromFile, never] = await list();
      assert.deepEqual(fromFile.execution, {
        order: null,
        inKernel: false,
        savedOrder: 7,
        success: null,
        durationMs: null,
        status: 'idle',
      });
      assert.deepEqual(never.execution, { order: null, inKernel: false, success: null, durationMs: null, status: 'idle' });
      const ran = await api('POST', `/notebooks/cells/${saved[0]}/run`, { notebook: 's_cccccc', wait: true });
      assert.equal(ran.body.cell.execution.inKernel, true);
      const order = ran.body.cell.execution.order;
      assert.ok(order >= 1);
      const { durationMs: _d, ...now } = (await list())[0].execution;
      assert.deepEqual(now, { order, inKernel: true, success: true, status: 'succeeded' });
      assert.equal((await api('GET', `/notebooks/cells/${saved[0]}?notebook=s_cccccc`)).body.cell.execution.inKernel, true);
      await new Promise((r) => setTimeout(r, 5));
      assert.equal((await api('POST', '/notebooks/restart', { notebook: 's_cccccc' })).status, 200);
      const [after] = await list();
      assert.deepEqual(after.execution, {
        order: null,
        inKernel: false,
        savedOrder: order,
        success: null,
        durationMs: null,
        status: 'idle',
      });
      const waited = await api('POST', `/notebooks/cells/${saved[0]}/wait`, { notebook: 's_cccccc' });
      assert.deepEqual(
        [waited.body.status, waited.body.success, waited.body.cell.execution.inKernel],
        ['idle', null, false],
        'waiting on it tells no run of this kernel',
      );
    });

    it('GET /notebooks/cells?outputs=full returns every cell view', async () => {
      const res = await api('GET', q('/notebooks/cells?outputs=full'));
      assert.equal(res.status, 200);
      assert.equal(res.body.notebook.path, '/work/a.ipynb');
      const [first, markup, , last] = res.body.cells;
      assert.deepEqual(first, {
        id: ids[0],
        index: 0,
        kind: 'code',
        language: 'python',
        code: 'x = 1',
        version: 1,
        metadata: {},
        tags: [],
        execution: { order: null, inKernel: false, success: null, durationMs: null, status: 'idle' },
        outputs: [],
      });
      assert.deepEqual([markup.kind, markup.language, markup.execution], ['markup', 'markdown', null]);
      assert.deepEqual(last.outputs, [{ items: [{ type: 'text/plain', text: '2', bytes: 1 }] }]);
    });

    it('lists outputs as summaries by default; outputs=none (or the old false) leaves them out; a bad value is a 400', async () => {
      const summary = (await api('GET', q('/notebooks/cells'))).body.cells[3];
      assert.deepEqual(summary.outputs, [{ items: [{ type: 'text/plain', text: '2', bytes: 1 }] }]);
      for (const value of ['none', 'false']) {
        const res = await api('GET', q(`/notebooks/cells?outputs=${value}`));
        assert.equal(res.status, 200, res.raw);
        assert.equal(res.body.cells[3].outputs, undefined);
        assert.equal(res.body.cells[3].code, summary.code);
      }
      const bad = await api('GET', q('/notebooks/cells?outputs=some'));
      assert.equal(bad.status, 400);
      assert.match(bad.raw, /none, summary, full/);
    });

    it('view=brief lists id, index, kind, status and first line only; it is not a read; with outputs it is a 400', async () => {
      docs.type(A.uri, 1, '# Title\n\nA long introduction\nwith more lines.');
      const res = await api('GET', q('/notebooks/cells?view=brief'));
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.notebook.sessionId, 's_aaaaaa');
      assert.deepEqual(res.body.cells, [
        { id: ids[0], index: 0, kind: 'code', status: 'idle', line: 'x = 1' },
        { id: ids[1], index: 1, kind: 'markup', line: '# Title', lines: 4 },
        { id: ids[2], index: 2, kind: 'code', status: 'idle', line: '' },
        { id: ids[3], index: 3, kind: 'code', status: 'idle', line: 'y = x + 1' },
      ]);
      // The brief list showed no code: writing the cell still needs a read of it.
      const write = await api('PATCH', `/notebooks/cells/${ids[1]}`, { notebook: 's_aaaaaa', code: '# New' });
      assert.equal(write.status, 409, write.raw);
      const full = await api('GET', q('/notebooks/cells?outputs=none'));
      assert.ok(res.raw.length * 2 < full.raw.length, `brief ${res.raw.length} B, outputs=none ${full.raw.length} B`);
      const both = await api('GET', q('/notebooks/cells?view=brief&outputs=full'));
      assert.equal(both.status, 400);
      assert.match(both.body.detail, /view=brief shows no outputs/);
      assert.equal((await api('GET', q('/notebooks/cells?view=short'))).status, 400);
    });

    it('a 404 under /notebooks/ lists its routes; a 400 for an unknown key names the allowed keys', async () => {
      const missing = await api('GET', '/notebooks/cell');
      assert.equal(missing.status, 404);
      assert.match(missing.body.detail, /No route GET \/notebooks\/cell; the routes under \/notebooks\/ are listed in "routes"/);
      assert.ok(missing.body.routes.includes('GET /notebooks/cells'), missing.raw);
      assert.ok(missing.body.routes.includes('GET /notebooks'), missing.raw);
      console.log(`      404 body: ${missing.raw}`);
      const unknown = await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 'x', idx: 1 });
      assert.equal(unknown.status, 400);
      assert.match(
        unknown.body.detail,
        /idx.*\(allowed: notebook, strict, code, kind, language, index, before, after, metadata, tags\)/,
      );
      console.log(`      400 body: ${unknown.raw}`);
      const op = await api('POST', '/notebooks/edits', { notebook: 's_aaaaaa', ops: [{ op: 'delete', ref: 0, code: 'x' }] });
      assert.equal(op.status, 400);
      assert.match(op.body.detail, /ops\.0: .*"code".*\(allowed: op, ref, version, force\)/);
      console.log(`      400 body (a batch op): ${op.raw}`);
    });

    it('names a notebook by session id, path or uri', async () => {
      for (const name of ['s_aaaaaa', '/work/a.ipynb', 'file:///work/a.ipynb']) assert.equal((await list(name)).length, 4, name);
      assert.equal((await list('untitled:Untitled-1.ipynb')).length, 1);
    });

    it('400 listing the notebooks when several are open and none is named', async () => {
      const res = await api('GET', '/notebooks/cells');
      assert.equal(res.status, 400);
      assert.match(
        res.body.detail,
        /2 notebooks are open: pass "notebook".*\/work\/a\.ipynb \(s_aaaaaa\).*untitled:Untitled-1\.ipynb \(s_bbbbbb\)/,
      );
      assert.equal(res.body.notebooks.length, 2);
    });

    it('uses the only open notebook when none is named', async () => {
      docs.close(B.uri);
      assert.equal((await api('GET', '/notebooks/cells')).body.cells.length, 4);
    });

    it('404 listing the open notebooks for an unknown notebook', async () => {
      const res = await api('GET', q('/notebooks/cells', '/work/nope.ipynb'));
      assert.equal(res.status, 404);
      assert.match(
        res.body.detail,
        /No open notebook matches '\/work\/nope\.ipynb'; open notebooks: \/work\/a\.ipynb \(s_aaaaaa\)/,
      );
    });

    it('GET /notebooks/cells/:ref by id, index and negative index', async () => {
      assert.equal((await api('GET', q(`/notebooks/cells/${ids[3]}`))).body.cell.code, 'y = x + 1');
      assert.equal((await api('GET', q('/notebooks/cells/1'))).body.cell.id, ids[1]);
      assert.equal((await api('GET', q('/notebooks/cells/-1'))).body.cell.id, ids[3]);
    });

    it('404 with the cell count for an index out of range or an unknown id', async () => {
      const out = await api('GET', q('/notebooks/cells/4'));
      assert.equal(out.status, 404);
      assert.match(out.body.detail, /Cell index 4 is out of range: \/work\/a\.ipynb has 4 cells/);
      assert.equal(out.body.cellCount, 4);
      const unknown = await api('GET', q('/notebooks/cells/cnope1'));
      assert.equal(unknown.status, 404);
      assert.match(unknown.body.detail, /No cell with id 'cnope1' .* 4 cells/);
    });

    it('400 for unknown query keys', async () => {
      const res = await api('GET', '/notebooks/cells?notebook=s_aaaaaa&cell=1');
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /^Invalid query: .*Unrecognized key: "cell"/);
    });
    it('400 for a query key given twice, and for a malformed percent-encoding in a path', async () => {
      const twice = await api('GET', '/notebooks/cells?notebook=s_aaaaaa&notebook=s_aaaaaa');
      assert.match(twice.body.detail, /^Invalid query: notebook: /);
      const bad = await api('GET', '/notebooks/cells/%E0%A4?notebook=s_aaaaaa');
      assert.deepEqual([bad.status, bad.body.detail], [400, "Malformed percent-encoding in the path segment '%E0%A4'"]);
    });
    it('decodes percent-encoded cell refs', async () => {
      const plain = await api('GET', '/notebooks/cells/-1?notebook=s_aaaaaa');
      const encoded = await api('GET', '/notebooks/cells/%2D1?notebook=s_aaaaaa');
      assert.deepEqual([encoded.status, encoded.body], [200, plain.body]);
    });
  });

  describe('creating', () => {
    it('appends a code cell in the main language by default (201)', async () => {
      const res = await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 'w = 4' });
      assert.equal(res.status, 201);
      assert.deepEqual(
        [res.body.cell.index, res.body.cell.kind, res.body.cell.language, res.body.cell.code],
        [4, 'code', 'python', 'w = 4'],
      );
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '# Title', '', 'y = x + 1', 'w = 4']);
    });

    it('places a cell at an index, or before/after another', async () => {
      await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 'first', index: 0 });
      await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 'after x', after: ids[0] });
      await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', kind: 'markup', code: '## before y', before: ids[3] });
      assert.deepEqual(docs.codes(A.uri), ['first', 'x = 1', 'after x', '# Title', '', '## before y', 'y = x + 1']);
    });

    it('400 for an index out of range, several positions or wrong types', async () => {
      const out = await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', index: 9 });
      assert.equal(out.status, 400);
      assert.match(out.body.detail, /"index" 9 is out of range: it must be between 0 and 4/);
      assert.match(
        (await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', index: 0, after: 0 })).body.detail,
        /at most one/,
      );
      const typed = await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 7, kind: 'raw' });
      assert.equal(typed.status, 400);
      assert.match(typed.body.detail, /^Invalid request body: code: .*; kind: /);
      assert.equal(docs.calls.filter((c) => c.method === 'apply').length, 0);
    });

    it('keeps ids stable across inserts and deletes of other cells', async () => {
      const before = await list();
      await api('POST', '/notebooks/cells', { notebook: 's_aaaaaa', code: 'new', index: 0 });
      await api('DELETE', q(`/notebooks/cells/${ids[2]}`));
      const after = await list();
      assert.deepEqual(
        after.map((c) => c.id),
        [after[0].id, ids[0], ids[1], ids[3]],
      );
      assert.deepEqual(
        after.slice(1).map((c) => c.code),
        [before[0].code, before[1].code, before[3].code],
      );
    });
  });

  describe('editing (read-before-write)', () => {
    const patch = (ref: string, body: object) => api('PATCH', `/notebooks/cells/${ref}`, { notebook: 's_aaaaaa', ...body });

    it('400 when a patch changes nothing; without "code" the text stays: never a wipe', async () => {
      await list();
      const res = await patch(ids[0]!, {});
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /give what to change: "code", "kind", "language", "metadata" or "tags"/);
      assert.equal((await patch(ids[0]!, { tags: ['parameters'] })).status, 200);
      assert.equal(docs.codes(A.uri)[0], 'x = 1');
    });

    it("each agent reads for itself: B's change after A's read refuses A's write, naming B, with the current cell", async () => {
      const as = (name: string) => ({ 'x-agent-bridge-client': name });
      const get = (name: string) => api('GET', q(`/notebooks/cells/${ids[0]}`), undefined, as(name));
      const write = (name: string, code: string) =>
        api('PATCH', `/notebooks/cells/${ids[0]}`, { notebook: 's_aaaaaa', code }, as(name));
      assert.equal((await get('agent-a')).status, 200);
      assert.equal((await get('agent-b')).status, 200);
      assert.equal((await write('agent-b', 'x = "b"')).status, 200);
      const refused = await write('agent-a', 'x = "a"');
      assert.equal(refused.status, 409, refused.raw);
      assert.match(refused.body.detail, /changed since you read it .*agent-b \(unverified\)/);
      assert.match(refused.body.changedBy, /agent-b \(unverified\)/);
      assert.equal(refused.body.cell.code, 'x = "b"', 'the 409 returns the current cell');
      // A client that never read the cell cannot write it, though others did.
      const unread = await write('agent-c', 'x = "c"');
      assert.equal(unread.status, 409, unread.raw);
      assert.match(unread.body.detail, /has not been read by you/);
      assert.deepEqual(docs.codes(A.uri)[0], 'x = "b"');
    });

    it('tags and metadata: shown in the cell view, written in place, version unchanged', async () => {
      await list();
      const tagged = await patch(ids[0]!, { tags: ['parameters', 'slow'] });
      assert.deepEqual(
        [tagged.body.cell.tags, tagged.body.cell.metadata, tagged.body.cell.version],
        [['parameters', 'slow'], { tags: ['parameters', 'slow'] }, 1],
      );
      const replaced = await patch(ids[0]!, { metadata: { papermill: { x: 1 } } });
      assert.deepEqual([replaced.body.cell.tags, replaced.body.cell.metadata], [[], { papermill: { x: 1 } }]);
      // Read-before-write holds for metadata too: a cell changed since it was read is refused.
      docs.type(A.uri, 0, 'x = 3');
      const stale = await patch(ids[0]!, { tags: ['t'] });
      assert.equal(stale.status, 409);
      assert.deepEqual(stale.body.cell.metadata, { papermill: { x: 1 } });
      // In a batch, with a created cell carrying its own tags.
      await list();
      const batch = await api('POST', '/notebooks/edits', {
        notebook: 's_aaaaaa',
        ops: [
          { op: 'edit', ref: ids[0], tags: ['a'] },
          { op: 'create', code: 'z = 1', tags: ['new'], after: ids[0] },
        ],
      });
      assert.equal(batch.status, 200, batch.raw);
      assert.deepEqual(
        batch.body.cells.map((c: Json) => c.tags),
        [['a'], ['new']],
      );
    });

    it('400 for unknown body keys and wrong types', async () => {
      await list();
      assert.match((await patch(ids[0]!, { code: 'x', sourc: 'y' })).body.detail, /Unrecognized key: "sourc"/);
      assert.match((await patch(ids[0]!, { code: 'x', version: 'one' })).body.detail, /version: /);
      assert.match((await patch(ids[0]!, { code: 'x', force: 'yes' })).body.detail, /force: /);
    });

    it('400 for a malformed JSON body', async () => {
      const res = await api('PATCH', `/notebooks/cells/${ids[0]}`, '{"code": "x');
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /Malformed JSON/);
    });

    it('409 for a non-empty cell that was never read; nothing changes', async () => {
      const res = await patch(ids[0]!, { code: 'x = 2' });
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /has not been read/);
      assert.equal(res.body.cell.code, 'x = 1');
      assert.equal(docs.codes(A.uri)[0], 'x = 1');
    });

    it('edits a cell that was read; the new version counts as read', async () => {
      await api('GET', q(`/notebooks/cells/${ids[0]}`));
      const first = await patch(ids[0]!, { code: 'x = 2' });
      assert.equal(first.status, 200);
      assert.deepEqual([first.body.cell.code, first.body.cell.version], ['x = 2', 2]);
      assert.equal((await patch(ids[0]!, { code: 'x = 3' })).status, 200);
      assert.equal(docs.codes(A.uri)[0], 'x = 3');
    });

    it('409 with the current cell when the person typed in it since it was read', async () => {
      await list();
      docs.type(A.uri, 0, 'x = 100  # mine');
      const res = await patch(ids[0]!, { code: 'x = 2' });
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /changed since you read it \(version 1 → 2\)/);
      assert.deepEqual([res.body.cell.id, res.body.cell.code, res.body.cell.version], [ids[0], 'x = 100  # mine', 2]);
      assert.equal(docs.codes(A.uri)[0], 'x = 100  # mine');
    });

    it('an explicit version overrides the record; force skips the check', async () => {
      docs.type(A.uri, 0, 'x = 100');
      assert.equal((await patch(ids[0]!, { code: 'x = 2', version: 1 })).status, 409);
      assert.equal((await patch(ids[0]!, { code: 'x = 2', version: 2 })).status, 200);
      docs.type(A.uri, 3, 'y = 0');
      assert.equal((await patch(ids[3]!, { code: 'y = 5', force: true })).status, 200);
      assert.deepEqual(docs.codes(A.uri), ['x = 2', '# Title', '', 'y = 5']);
    });

    it('empty cells need no read', async () => {
      const res = await patch(ids[2]!, { code: 'print(1)' });
      assert.equal(res.status, 200);
    });

    it('changes kind and language, keeping the id', async () => {
      await list();
      const res = await patch(ids[0]!, { code: '*x*', kind: 'markup' });
      assert.deepEqual(
        [res.body.cell.id, res.body.cell.kind, res.body.cell.language, res.body.cell.execution],
        [ids[0], 'markup', 'markdown', null],
      );
    });

    it('404 with the cell count for an unknown ref', async () => {
      const res = await patch('7', { code: 'x' });
      assert.equal(res.status, 404);
      assert.equal(res.body.cellCount, 4);
    });

    it('DELETE needs a read too, and force in the query skips it', async () => {
      assert.equal((await api('DELETE', q(`/notebooks/cells/${ids[0]}`))).status, 409);
      const forced = await api('DELETE', q(`/notebooks/cells/${ids[0]}?force=true`));
      assert.deepEqual([forced.status, forced.body], [200, { deleted: ids[0], cellCount: 3 }]);
      assert.equal((await api('DELETE', q(`/notebooks/cells/${ids[0]}`))).status, 404);
      assert.equal((await api('DELETE', q(`/notebooks/cells/${ids[3]}?version=1`))).status, 200);
      assert.equal((await api('DELETE', q(`/notebooks/cells/${ids[1]}?version=one`))).status, 400);
    });

    it('moves a cell to an index or next to another; id and outputs go with it', async () => {
      const move = (ref: string, body: object) => api('POST', `/notebooks/cells/${ref}/move`, { notebook: 's_aaaaaa', ...body });
      const res = await move(ids[3]!, { to: 0 });
      assert.equal(res.status, 200);
      assert.deepEqual([res.body.cell.id, res.body.cell.index, res.body.cell.outputs[0].items[0].text], [ids[3], 0, '2']);
      await move(ids[3]!, { after: ids[1] });
      assert.deepEqual(
        (await list()).map((c) => c.id),
        [ids[0], ids[1], ids[3], ids[2]],
      );
      assert.equal((await move(ids[3]!, { to: 4 })).status, 400);
      assert.equal((await move(ids[3]!, {})).status, 400);
    });
  });

  describe('batches', () => {
    const edits = (body: object) => api('POST', '/notebooks/edits', { notebook: 's_aaaaaa', ...body });

    it('refuses a batch over the cap with a 413 that names the cap and says to split it; the cap itself applies', async () => {
      const creates = (n: number) => Array.from({ length: n }, (_, i) => ({ op: 'create', code: `c${i}` }));
      const over = await edits({ ops: creates(MAX_BATCH_OPS + 1) });
      assert.equal(over.status, 413, over.raw);
      assert.match(over.body.detail, new RegExp(`at most ${MAX_BATCH_OPS}`));
      assert.match(over.body.detail, /Split it/);
      assert.equal(docs.codes(A.uri).length, 4, 'nothing changed');
      const at = await edits({ ops: creates(MAX_BATCH_OPS) });
      assert.equal(at.status, 200, at.raw.slice(0, 300));
      assert.equal(docs.codes(A.uri).length, 4 + MAX_BATCH_OPS);
    });

    it('applies every op as one change', async () => {
      await list();
      const res = await edits({
        ops: [
          { op: 'create', code: 'import math', index: 0 },
          { op: 'edit', ref: ids[0], code: 'x = math.pi' },
          { op: 'delete', ref: ids[2] },
          { op: 'move', ref: ids[1], to: 0 },
        ],
      });
      assert.equal(res.status, 200, res.raw);
      assert.deepEqual(docs.codes(A.uri), ['# Title', 'import math', 'x = math.pi', 'y = x + 1']);
      assert.equal(docs.calls.filter((c) => c.method === 'apply').length, 1);
      assert.deepEqual(res.body.deleted, [ids[2]]);
      assert.deepEqual(
        res.body.cells.map((c: Json) => c.code),
        ['# Title', 'import math', 'x = math.pi'],
      );
      assert.equal(res.body.cellCount, 4);
    });

    it('changes nothing when the last op is invalid', async () => {
      await list();
      const before = JSON.stringify(await list());
      const res = await edits({
        ops: [
          { op: 'create', code: 'a' },
          { op: 'edit', ref: ids[0], code: 'b' },
          { op: 'delete', ref: 9 },
        ],
      });
      assert.equal(res.status, 404);
      assert.match(res.body.detail, /^ops\.2: Cell index 9 is out of range/);
      assert.equal(JSON.stringify(await list()), before);
      assert.equal(docs.calls.filter((c) => c.method === 'apply').length, 0);
    });

    it('409 for a stale cell anywhere in the batch; nothing changes', async () => {
      await list();
      docs.type(A.uri, 3, 'y = 7');
      const res = await edits({
        ops: [
          { op: 'create', code: 'a' },
          { op: 'delete', ref: ids[3] },
        ],
      });
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /^ops\.1: Cell .* changed since you read it/);
      assert.equal(res.body.cell.code, 'y = 7');
      assert.deepEqual(docs.codes(A.uri), ['x = 1', '# Title', '', 'y = 7']);
    });

    it('400 for an op on a cell another op deletes, and for bad ops', async () => {
      await list();
      const res = await edits({
        ops: [
          { op: 'edit', ref: ids[0], code: 'q' },
          { op: 'delete', ref: ids[0] },
        ],
      });
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /deleted by ops\.1/);
      assert.match((await edits({ ops: [{ op: 'rename', ref: 0 }] })).body.detail, /^Invalid request body: ops\.0\.op: /);
      assert.match((await edits({ ops: [{ op: 'edit', ref: 0 }] })).body.detail, /ops\.0: give what to change/);
      assert.match((await edits({ ops: [] })).body.detail, /ops: give at least one operation/);
    });

    it('reports the applied edits as failed when the editor refuses them', async () => {
      await list();
      docs.failNextApply = true;
      const res = await edits({ ops: [{ op: 'edit', ref: ids[0], code: 'q' }] });
      assert.equal(res.status, 409);
      assert.deepEqual(docs.codes(A.uri)[0], 'x = 1');
    });

    it('runs cells after applying, and can wait for them; a run cell is shown once', async () => {
      const res = await edits({ ops: [{ op: 'create', code: 'print("hi")', index: 0 }], run: [0, ids[0]], wait: true });
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.runs.length, 2);
      assert.equal(res.body.runs[0].success, true);
      // The batch's own cells show the state after the run, not the edit's; their runs name them.
      assert.deepEqual(Object.keys(res.body.runs[0]), ['cellId', 'done', 'success', 'status']);
      assert.equal(res.body.runs[0].cellId, res.body.cells[0].id);
      assert.equal(res.body.cells[0].outputs[0].items[0].text, 'hi\n');
      assert.equal(res.body.cells[0].execution.status, 'succeeded');
      // A cell the batch ran but did not change is carried by its run.
      assert.equal(res.body.cells.length, 1);
      assert.equal(res.body.runs[1].cell.id, ids[0]);
    });

    it('checks the cells to run before applying anything', async () => {
      const res = await edits({ ops: [{ op: 'create', code: 'a' }], run: [ids[1]] });
      assert.equal(res.status, 400);
      assert.match(res.body.detail, /^run\.0: cell .* is a markup cell/);
      assert.equal(docs.codes(A.uri).length, 4);
    });
  });

  describe('running', () => {
    const run = (ref: string, body: object = {}, query = '', headers: Record<string, string> = {}) =>
      api('POST', `/notebooks/cells/${ref}/run${query}`, { notebook: 's_aaaaaa', ...body }, headers);

    it('202 when not waiting: the cell is queued', async () => {
      const res = await run(ids[0]!);
      assert.deepEqual([res.status, res.body], [202, { queued: [ids[0]] }]);
      assert.deepEqual(docs.calls.find((c) => c.method === 'execute')?.args, [ids[0]]);
    });

    it('waits for the run and returns its outputs and success', async () => {
      docs.type(A.uri, 0, 'print("hi")');
      for (const [body, query] of [
        [{ wait: true, outputs: 'full' }, ''],
        [{}, '?wait=true&outputs=full'],
      ] as const) {
        const res = await run(ids[0]!, body, query);
        assert.equal(res.status, 200, res.raw);
        assert.equal(res.body.success, true);
        assert.deepEqual(res.body.cell.outputs, [{ items: [{ type: 'stdout', text: 'hi\n', bytes: 3 }] }]);
        assert.equal(res.body.status, 'succeeded');
        assert.equal(res.body.cell.execution.status, 'succeeded');
      }
    });

    it('returns the error of a failing cell with success false (summary by default, full on request)', async () => {
      docs.type(A.uri, 0, 'boom()');
      const res = await run(ids[0]!, { wait: true });
      assert.equal(res.status, 200);
      assert.equal(res.body.success, false);
      const [out, err] = res.body.cell.outputs;
      assert.deepEqual(out.items[0], { type: 'stdout', text: 'before\n', bytes: 7 });
      assert.deepEqual(err.items[0], {
        type: 'error',
        name: 'NameError',
        message: "name 'boom' is not defined",
        bytes: err.items[0].bytes,
      });
      const full = await run(ids[0]!, { wait: true, outputs: 'full' });
      assert.deepEqual(full.body.cell.outputs[1].items[0], {
        type: 'error',
        name: 'NameError',
        message: "name 'boom' is not defined",
        traceback: 'Traceback (most recent call last):\nNameError: boom',
        bytes: err.items[0].bytes,
      });
    });

    it('answers with the runs the kernel started on its own meanwhile (marimo re-runs dependents), waited for', async () => {
      docs.type(A.uri, 0, 'x = 2');
      docs.type(A.uri, 2, 'w = x * 2');
      const res = await run(ids[0]!, { wait: true });
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.success, true);
      assert.deepEqual(
        res.body.alsoRan.map((r: Json) => [r.cell.id, r.done, r.status, r.cell.outputs]),
        [[ids[2], true, 'succeeded', [{ items: [{ type: 'stdout', text: 'w is 4\n', bytes: 7 }] }]]],
      );
      assert.deepEqual(
        docs.calls.filter((c) => c.method === 'execute').map((c) => c.args),
        [[ids[0]]],
        'the bridge asked for one run only',
      );
      // A run after which the kernel runs nothing else has no alsoRan.
      docs.type(A.uri, 0, 'print("hi")');
      assert.equal((await run(ids[0]!, { wait: true })).body.alsoRan, undefined);
    });

    it('a re-run still going when the deadline passes is listed as not done', async () => {
      docs.type(A.uri, 0, 'x = 3');
      docs.type(A.uri, 2, 'slow()');
      const res = await run(ids[0]!, { wait: true, timeoutMs: 150 });
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.status, 'succeeded');
      assert.deepEqual(
        res.body.alsoRan.map((r: Json) => [r.cell.id, r.done, r.success, r.status]),
        [[ids[2], false, null, 'running']],
      );
    });

    it('504 with the current state after the timeout, without interrupting', async () => {
      docs.type(A.uri, 0, 'sleep()');
      const res = await run(ids[0]!, { wait: true, timeoutMs: 50 });
      assert.equal(res.status, 504);
      assert.match(res.body.detail, /Still running after 50 ms/);
      assert.equal(res.body.cell.execution.status, 'running');
      assert.equal(
        docs.calls.some((c) => c.method === 'interrupt'),
        false,
      );
    });

    it('a run whose wait ran out is waited on again with POST /wait, not re-run; an idle cell answers at once', async () => {
      docs.type(A.uri, 0, 'sleep()');
      const first = await run(ids[0]!, { wait: true, timeoutMs: 50 });
      assert.equal(first.status, 504);
      assert.match(first.body.detail, /wait again with POST \/notebooks\/cells\/<id>\/wait/);
      const again = await api('POST', `/notebooks/cells/${ids[0]}/wait`, { notebook: 's_aaaaaa', timeoutMs: 5000 });
      assert.equal(again.status, 200, again.raw);
      assert.deepEqual([again.body.success, again.body.status], [true, 'succeeded']);
      assert.equal(docs.calls.filter((c) => c.method === 'execute').length, 1, 'the cell ran once');
      const idle = await api('POST', `/notebooks/cells/${ids[0]}/wait`, { notebook: 's_aaaaaa' });
      assert.deepEqual([idle.status, idle.body.status], [200, 'succeeded']);
    });

    it('streams outputs as they arrive with Accept: text/event-stream', async () => {
      docs.type(A.uri, 0, 'print("hi")');
      const res = await run(ids[0]!, {}, '', { accept: 'text/event-stream' });
      assert.equal(res.status, 200);
      assert.equal(res.type, 'text/event-stream; charset=utf-8');
      const events = res.raw
        .trim()
        .split('\n\n')
        .map((block) => {
          const [event, data] = block.split('\n');
          return { event: event!.slice('event: '.length), data: JSON.parse(data!.slice('data: '.length)) as Json };
        });
      assert.deepEqual(events.slice(0, -1), [
        { event: 'stdout', data: { data: 'h' } },
        { event: 'stdout', data: { data: 'i\n' } },
      ]);
      assert.equal(events.at(-1)!.event, 'done');
      assert.equal(events.at(-1)!.data.success, true);
    });

    it('serves binary and cut output items raw from their url', async () => {
      docs.type(A.uri, 0, 'plot()');
      const res = await run(ids[0]!, { wait: true, outputs: 'full' });
      const [image, text] = res.body.cell.outputs.map((o: Json) => o.items[0]);
      assert.deepEqual([image.type, image.bytes, image.text], ['image/png', PNG.length, undefined]);
      const raw = await request(port, { path: image.url, headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(raw.headers['content-type'], 'image/png');
      assert.equal(raw.headers['x-content-type-options'], 'nosniff');
      assert.equal(Buffer.from(raw.body, 'latin1').length > 0, true);
      assert.equal(text.truncated, true);
      assert.equal(text.omitted, 200);
      assert.ok(text.text.includes(`200 characters cut here; the whole item: GET ${text.url}`));
      const full = await api('GET', text.url);
      assert.deepEqual([full.status, full.raw.length, full.type], [200, 300, 'text/plain; charset=utf-8']);
      assert.equal((await api('GET', q(`/notebooks/cells/${ids[0]}/outputs/5/0`))).status, 404);
    });

    it('serves an HTML output under a sandboxing Content-Security-Policy, so no browser runs it', async () => {
      await list();
      docs.type(A.uri, 0, 'page()');
      const res = await run(ids[0]!, { wait: true, outputs: 'full' });
      assert.equal(res.body.cell.outputs[0].items[0].type, 'text/html');
      const raw = await request(port, {
        path: q(`/notebooks/cells/${ids[0]}/outputs/0/0`),
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(raw.status, 200, raw.body);
      assert.match(String(raw.headers['content-type']), /^text\/html/);
      assert.match(String(raw.headers['content-security-policy']), /^sandbox\b/);
    });

    it('400 for a markup cell, 409 when no kernel serves the notebook', async () => {
      assert.equal((await run(ids[1]!)).status, 400);
      const res = await api('POST', `/notebooks/cells/0/run`, { notebook: 's_bbbbbb' });
      assert.equal(res.status, 409);
      assert.match(res.body.detail, /^Cannot run cells of untitled:Untitled-1\.ipynb: no kernel is selected/);
    });

    it('interrupt, and restart only for the builtin kernel', async () => {
      assert.deepEqual((await api('POST', '/notebooks/interrupt', { notebook: 's_aaaaaa' })).body, {
        interrupted: true,
        how: 'sigint',
      });
      assert.deepEqual((await api('POST', '/notebooks/restart', { notebook: 's_aaaaaa' })).body, { restarted: true });
      const other = await api('POST', '/notebooks/restart', { notebook: 's_bbbbbb' });
      assert.equal(other.status, 409);
      assert.deepEqual(
        docs.calls.filter((c) => c.method !== 'apply').map((c) => c.method),
        ['interrupt', 'restart'],
      );
    });
  });

  describe('run many, clear, save', () => {
    const sse = (raw: string) =>
      raw
        .trim()
        .split('\n\n')
        .map((block) => {
          const [event, data] = block.split('\n');
          return { event: event!.slice('event: '.length), data: JSON.parse(data!.slice('data: '.length)) as Json };
        });
    const runMany = (body: object, headers: Record<string, string> = {}) =>
      api('POST', '/notebooks/run', { notebook: 's_aaaaaa', ...body }, headers);

    it('runs all code cells in order; "stop" leaves the cells after a failure unrun', async () => {
      docs.type(A.uri, 0, 'print("hi")');
      docs.type(A.uri, 2, 'boom()');
      const res = await runMany({ all: true, wait: true });
      assert.equal(res.status, 200, res.raw);
      assert.deepEqual(
        res.body.runs.map((r: Json) => [r.cell.id, r.status, r.success]),
        [
          [ids[0], 'succeeded', true],
          [ids[2], 'failed', false],
        ],
      );
      assert.deepEqual([res.body.done, res.body.status, res.body.skipped, res.body.pending], [true, 'failed', [ids[3]], []]);
      // One execute per cell: the next is queued only once the one before succeeded.
      assert.equal(docs.calls.filter((c) => c.method === 'execute').length, 2);
    });

    it('a kernel that cancels the cells queued behind a failure gets the whole series at once; its cancelled cells are skipped', async () => {
      docs.stopsAtFailure = true;
      docs.type(A.uri, 2, 'boom()');
      const res = await runMany({ all: true, wait: true });
      assert.deepEqual(
        res.body.runs.map((r: Json) => [r.cell.id, r.status]),
        [
          [ids[0], 'succeeded'],
          [ids[2], 'failed'],
        ],
      );
      assert.deepEqual([res.body.status, res.body.skipped], ['failed', [ids[3]]]);
      assert.deepEqual(docs.calls.filter((c) => c.method === 'execute')[0]!.args, [ids[0], ids[2], ids[3]]);
      // With "continue" such a kernel still cancels the rest: they are skipped, not reported as runs.
      const go = await runMany({ all: true, onError: 'continue', wait: true });
      assert.deepEqual([go.body.runs.map((r: Json) => r.status), go.body.skipped], [['succeeded', 'failed'], [ids[3]]]);
      const listed = await api('GET', '/notebooks/cells?notebook=s_aaaaaa');
      assert.equal(listed.body.cells[3].execution.status, 'idle');
    });

    it('"continue" queues every cell at once and runs them all; a range and a list work too', async () => {
      docs.type(A.uri, 2, 'boom()');
      const res = await runMany({ range: { start: 0, end: 4 }, onError: 'continue', wait: true });
      assert.deepEqual(
        res.body.runs.map((r: Json) => r.status),
        ['succeeded', 'failed', 'succeeded'],
      );
      assert.deepEqual(docs.calls.filter((c) => c.method === 'execute')[0]!.args, [ids[0], ids[2], ids[3]]);
      const listed = await runMany({ cells: [ids[3], 0], wait: true });
      assert.deepEqual(
        listed.body.runs.map((r: Json) => r.cell.id),
        [ids[0], ids[3]],
      );
    });

    it('202 without wait; 400 for no or several selections, markup named, an empty range', async () => {
      const res = await runMany({ cells: [0] });
      assert.deepEqual([res.status, res.body], [202, { queued: [ids[0]] }]);
      assert.match((await runMany({})).body.detail, /exactly one of "cells"/);
      assert.match((await runMany({ all: true, cells: [0] })).body.detail, /exactly one of "cells"/);
      assert.match((await runMany({ cells: [1] })).body.detail, /cells\.0: cell .* is a markup cell/);
      assert.match((await runMany({ range: { start: 1, end: 2 } })).body.detail, /No code cell in the selection/);
      assert.match((await runMany({ range: { start: 3, end: 9 } })).body.detail, /has 4 cells; give 0 <= start < end <= 4/);
    });

    it('streams per cell: output events name their cell, a "cell" event as each ends, then done', async () => {
      docs.type(A.uri, 0, 'print("hi")');
      const res = await runMany({ cells: [0, 3] }, { accept: 'text/event-stream' });
      const events = sse(res.raw);
      assert.deepEqual(
        events.map((e) => [e.event, e.data.cell?.id ?? e.data.cell]),
        [
          ['stdout', ids[0]],
          ['stdout', ids[0]],
          ['cell', ids[0]],
          ['cell', ids[3]],
          ['done', undefined],
        ],
      );
      assert.equal(events.at(-1)!.data.status, 'succeeded');
    });

    it('504 with the finished runs and the pending cells when the wait times out', async () => {
      docs.type(A.uri, 2, 'sleep()');
      const res = await runMany({ all: true, wait: true, timeoutMs: 100 });
      assert.equal(res.status, 504);
      assert.deepEqual([res.body.done, res.body.status, res.body.pending], [false, 'running', [ids[2], ids[3]]]);
      assert.deepEqual(
        res.body.runs.map((r: Json) => r.cell.id),
        [ids[0]],
      );
    });

    it('clears the outputs of a list, a range or all cells', async () => {
      const res = await api('POST', '/notebooks/clear-outputs', { notebook: 's_aaaaaa', cells: [3] });
      assert.deepEqual([res.status, res.body], [200, { cleared: [ids[3]] }]);
      assert.deepEqual((await list())[3].outputs, []);
      assert.deepEqual((await api('POST', '/notebooks/clear-outputs', { notebook: 's_aaaaaa', all: true })).body, {
        cleared: [ids[0], ids[2], ids[3]],
      });
    });

    it('saves one notebook, or all the agents changed; a failing save says why', async () => {
      const one = await api('POST', '/notebooks/save', { notebook: 's_aaaaaa' });
      assert.deepEqual(one.body, { saved: [{ sessionId: 's_aaaaaa', path: '/work/a.ipynb', saved: true }] });
      assert.deepEqual((await api('POST', '/notebooks/save', { all: true })).body, { saved: [] });
      await api('PATCH', `/notebooks/cells/${ids[2]}`, { notebook: 's_aaaaaa', code: 'w = 0' });
      docs.failSave.set(A.uri, 'the file is read-only');
      const all = await api('POST', '/notebooks/save', { all: true });
      assert.deepEqual(all.body, {
        saved: [{ sessionId: 's_aaaaaa', path: '/work/a.ipynb', saved: false, detail: 'the file is read-only' }],
      });
      const failed = await api('POST', '/notebooks/save', { notebook: 's_aaaaaa' });
      assert.deepEqual([failed.status, failed.body.detail], [409, 'the file is read-only']);
      assert.match((await api('POST', '/notebooks/save', { all: true, notebook: 'x' })).body.detail, /not both/);
    });
  });
});
