/**
 * Answer sizes: an analyst's six-step task scripted over HTTP and over MCP, on copies of one
 * pandas notebook (nbformat 4.4, as many public ones are) with the builtin kernel: once asking for
 * every output whole (`outputs: "full"`, what every answer carried before output detail existed),
 * once with the defaults, and once with the defaults and the brief list (which shows no code, so
 * the cells to edit are read first). The bytes of each step's answers are printed, with the
 * ratios the answers are held to (the full figure is what answers carried before output detail
 * existed: it also counts, over MCP, the structured copy of each answer's JSON that the cell tools
 * sent before they answered once, and the cell a batch's run repeated before it named it by
 * `cellId`), and the defaults must carry
 * what the agent needs (ids, code, run status, first lines, the error's name and message, the
 * image url). Beside it: the notebook's cell ids made to last (the person's prompt, looked at),
 * and the small answers that save an agent a call.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deepEq, eq, includes, match, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { screenshot } from '../screenshots';
import { checkRun, context } from './context';
import { callTool } from './jupyter';
import { sleep } from '../../src/core/sleep';

const code = (source: string) => ({ cell_type: 'code', metadata: {}, execution_count: null, outputs: [], source });
/** nbformat 4.4 (no cell ids), as many public notebooks are. */
const NOTEBOOK = {
  nbformat: 4,
  nbformat_minor: 4,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
  cells: [
    { cell_type: 'markdown', metadata: {}, source: '# Sales\n\nA pandas analysis for the answer-size check.' },
    code(
      'import numpy as np\nimport pandas as pd\nrng = np.random.default_rng(0)\n' +
        "df = pd.DataFrame({'day': np.arange(5000), 'sales': rng.normal(100, 15, 5000), 'region': rng.choice(['north', 'south', 'east', 'west'], 5000)})\ndf",
    ),
    code('df.describe()'),
    code('for i in range(300):\n    print(i, round(df.sales[i], 3), df.region[i])'),
    // A bar chart as PNG (flat colours, as charts are): the regions' mean sales.
    code(
      'import struct, zlib\nclass Chart:\n    def _repr_png_(self):\n' +
        "        means = df.groupby('region').sales.mean().tolist()\n" +
        '        bar = lambda x, y: x < 160 and x % 40 < 30 and 160 - y < means[x // 40]\n' +
        "        rows = b''.join(b'\\x00' + b''.join(bytes((40, 90, 200) if bar(x, y) else (255, 255, 255)) for x in range(180)) for y in range(160))\n" +
        "        chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n" +
        "        return b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 180, 160, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b'')\nChart()",
    ),
    code("df.groupby('region').sales.agg(['mean', 'std', 'count'])"),
    code("df['week'] = df.day // 7\ndf.pivot_table(index='week', columns='region', values='sales').head(40)"),
    code("df['revenue']"),
  ],
};

type Json = Record<string, unknown>;
/** Bytes of one answer and its JSON. */
type Answer = { bytes: number; json: Json };
/** What the answers are asked for: every output whole, the defaults, or the defaults with the brief list. */
type Mode = 'full' | 'defaults' | 'brief';
const NO_ANSWER: Answer = { bytes: 0, json: {} };

/** The steps through one transport. */
interface Transport {
  list(mode: Mode): Promise<Answer>;
  runAll(mode: Mode): Promise<Answer>;
  batch(body: Json, mode: Mode): Promise<Answer>;
  /** A cell read whole but for its outputs (before editing it, after a brief list). */
  read(cellId: string): Promise<Answer>;
  image(url: string, cellId: string, mode: Mode): Promise<Answer>;
  save(): Promise<Answer>;
}

const detail = (mode: Mode) => (mode === 'full' ? { outputs: 'full' } : {});

/** The text a batch answer repeated before its runs named the cells its `cells` carries: `"cell": {…},` a run. */
function repeatedRunCells(json: Json): string {
  const cells = new Map((json['cells'] as Cell[] | undefined)?.map((c) => [c.id, c]));
  const runs = (json['runs'] as { cellId?: string }[] | undefined) ?? [];
  return runs.map((r) => (r.cellId && cells.has(r.cellId) ? `"cell":${JSON.stringify(cells.get(r.cellId))},` : '')).join('');
}

function http(client: BridgeClient, sid: string, signal: AbortSignal): Transport {
  const answer = async (p: Promise<{ status: number; rawBytes: Buffer; text: string }>, what: string) => {
    const r = await p;
    ok(r.status < 300, `${what}: ${r.status} ${show(r.text, 300)}`);
    let json: Json = {};
    try {
      json = JSON.parse(r.text) as Json;
    } catch {
      // Raw output bytes (the image).
    }
    return { bytes: r.rawBytes.length, json };
  };
  const q = `notebook=${encodeURIComponent(sid)}`;
  const listQuery = { full: '&outputs=full', defaults: '', brief: '&view=brief' };
  return {
    list: (mode) => answer(client.get(`/notebooks/cells?${q}${listQuery[mode]}`, { signal }), 'list'),
    runAll: (mode) =>
      answer(
        client.post(
          '/notebooks/run',
          { notebook: sid, all: true, onError: 'continue', wait: true, timeoutMs: 90_000, ...detail(mode) },
          { signal, timeoutMs: 100_000 },
        ),
        'run all',
      ),
    batch: async (body, mode) => {
      const a = await answer(
        client.post('/notebooks/edits', { notebook: sid, ...body, ...detail(mode) }, { signal, timeoutMs: 60_000 }),
        'batch',
      );
      return mode === 'full' ? { ...a, bytes: a.bytes + Buffer.byteLength(repeatedRunCells(a.json)) } : a;
    },
    read: (cellId) => answer(client.get(`/notebooks/cells/${cellId}?${q}&outputs=none`, { signal }), 'read'),
    image: (url) => answer(client.get(url, { signal }), 'image'),
    save: () => answer(client.post('/notebooks/save', { notebook: sid }, { signal }), 'save'),
  };
}

function mcp(client: BridgeClient, sid: string, signal: AbortSignal): Transport {
  // `full` also counts what the answers carried before (the file's header): the structured copy, the repeated cells.
  const answer = async (name: string, args: Json, mode: Mode = 'defaults') => {
    // An output url names its notebook itself.
    const named = name === 'get_output' ? args : { notebook: sid, ...args };
    const result = (await callTool(client, name, named, signal, 100_000)) as {
      isError?: boolean;
      content: { type: string; text?: string }[];
    };
    ok(!result.isError, `${name}: ${show(result.content, 300)}`);
    const text = result.content.find((c) => c.type === 'text')?.text ?? '{}';
    const json = JSON.parse(text) as Json;
    if (mode !== 'full') return { bytes: Buffer.byteLength(JSON.stringify(result)), json };
    // The repeated cells inside the text part (escaped there) and in the structured copy.
    const repeated = repeatedRunCells(json);
    const before = Buffer.byteLength(JSON.stringify(repeated)) - 2 + Buffer.byteLength(text + repeated);
    return { bytes: Buffer.byteLength(JSON.stringify(result)) + before, json };
  };
  return {
    list: (mode) => answer('list_cells', mode === 'brief' ? { view: 'brief' } : detail(mode), mode),
    runAll: (mode) => answer('run_cells', { all: true, onError: 'continue', timeoutMs: 90_000, ...detail(mode) }, mode),
    batch: (body, mode) => answer('edit_cells', { ...body, ...detail(mode) }, mode),
    read: (cellId) => answer('get_cell', { ref: cellId, outputs: 'none' }),
    // The image as image content: the cell whole with its images (what get_cell sent by default
    // before), or the output alone by its url.
    image: (url, cellId, mode) =>
      mode === 'full' ? answer('get_cell', { ref: cellId, outputs: 'full', images: true }, mode) : answer('get_output', { url }),
    save: () => answer('save_notebook', {}),
  };
}

interface Cell {
  id: string;
  index: number;
  code: string;
  line?: string;
  version: number;
  outputs?: { items: { type: string; text?: string; name?: string; message?: string; url?: string }[] }[];
}

const STEPS = ['list', 'run all', 'create two', 'read three', 'edit+run three', 'image', 'save'] as const;

/** The task's steps; returns each step's bytes and what the answers before the image held. */
async function task(t: Transport, mode: Mode): Promise<{ bytes: number[]; seen: string }> {
  const listed = await t.list(mode);
  const cells = listed.json['cells'] as Cell[];
  const ran = await t.runAll(mode);
  const runs = ran.json['runs'] as { status: string; cell: Cell }[];
  eq(runs.length, 7, 'cells run');
  const chart = runs.find((r) => r.cell.code.includes('Chart()'))!.cell;
  const image = chart.outputs!.flatMap((o) => o.items).find((i) => i.type === 'image/png');
  ok(image?.url, `the chart's image url in ${show(chart.outputs)}`);
  const describe = cells[2]!;
  const created = await t.batch(
    {
      ops: [
        { op: 'create', code: 'total = df.sales.sum()\nprint(total)', after: describe.id },
        { op: 'create', code: 'print(df.shape)', after: describe.id },
      ],
    },
    mode,
  );
  // A brief list shows no code and is no read: the cells to edit are read first.
  const toEdit = [cells[3]!, cells[5]!, cells[6]!];
  const reads = mode === 'brief' ? await Promise.all(toEdit.map((c) => t.read(c.id))) : [];
  const read = reads.length ? { bytes: reads.reduce((n, r) => n + r.bytes, 0), json: {} } : NO_ANSWER;
  const [loop, group, pivot] = reads.length ? reads.map((r) => r.json['cell'] as Cell) : toEdit;
  const edited = await t.batch(
    {
      ops: [
        { op: 'edit', ref: loop!.id, version: loop!.version, code: loop!.code.replace('300', '200') },
        { op: 'edit', ref: group!.id, version: group!.version, code: group!.code.replace("'count'", "'median'") },
        { op: 'edit', ref: pivot!.id, version: pivot!.version, code: pivot!.code.replace('head(40)', 'head(30)') },
      ],
      run: [loop!.id, group!.id, pivot!.id],
      wait: true,
      timeoutMs: 60_000,
    },
    mode,
  );
  const shown = await t.image(image.url, chart.id, mode);
  const saved = await t.save();
  const answers = [listed, ran, created, read, edited, shown, saved];
  return { bytes: answers.map((a) => a.bytes), seen: JSON.stringify([listed, ran, created, edited].map((a) => a.json)) };
}

/** Fails unless the answers still carry what the agent needs. */
function needed(seen: string, what: string): void {
  for (const [thing, text] of [
    ['a cell id and its code', 'df.describe()'],
    ['the first printed lines', '0 '],
    ['the failing cell\u2019s error name', '"name":"KeyError"'],
    ['the run statuses', '"status":"failed"'],
    ['the image url', '/outputs/'],
    ['the edited cells\u2019 new output', 'median'],
  ] as const)
    includes(seen, text, `${what}: ${thing}`);
}

const sum = (b: readonly number[]) => b.reduce((a, n) => a + n, 0);

/** Writes a copy of the notebook into the workspace and opens it with the builtin kernel. */
async function openCopy(name: string, signal: AbortSignal): Promise<{ sid: string; file: string }> {
  const { client, workspace } = context();
  const file = path.join(workspace, `${name}.ipynb`);
  fs.writeFileSync(file, `${JSON.stringify(NOTEBOOK, null, 1)}\n`);
  const r = await client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { signal, timeoutMs: 30_000 });
  eq(r.status, 200, `open ${name} (${show(r.text, 300)})`);
  return { sid: r.json<{ session: { id: string } }>().session.id, file };
}

export function answerChecks(): void {
  it('answers: the task takes at most a third of the bytes with the defaults; MCP within 1.2x HTTP; the brief list a third of outputs=none', async () => {
    const { signal } = checkRun();
    const { client } = context();
    const totals: Record<string, Record<Mode, number>> = {};
    const lists: string[] = [];
    const listed: Record<string, { brief: number; none: number }> = {};
    for (const [name, make] of [
      ['HTTP', http],
      ['MCP', mcp],
    ] as const) {
      const figures = {} as Record<Mode, number[]>;
      let briefSid = '';
      for (const mode of ['full', 'defaults', 'brief'] as const) {
        const { sid } = await openCopy(`answers-${name}-${mode}`, signal);
        const run = await task(make(client, sid, signal), mode);
        if (mode !== 'full') needed(run.seen, `${name} ${mode}`);
        figures[mode] = run.bytes;
        if (mode === 'brief') briefSid = sid;
      }
      totals[name] = { full: sum(figures.full), defaults: sum(figures.defaults), brief: sum(figures.brief) };
      for (const mode of ['full', 'defaults', 'brief'] as const)
        console.log(
          `      ${name} ${mode}: ${sum(figures[mode])} B in ${figures[mode].filter((b) => b > 0).length} answers [` +
            `${STEPS.map((s, i) => `${s} ${figures[mode][i]}`).join(', ')}]`,
        );
      console.log(`      ${name} defaults / full: ${(totals[name].defaults / totals[name].full).toFixed(3)}`);
      // The same notebook, as the brief list and as outputs=none show it.
      const t = make(client, briefSid, signal);
      const brief = (await t.list('brief')).bytes;
      const none =
        name === 'HTTP'
          ? (await client.get(`/notebooks/cells?notebook=${briefSid}&outputs=none`, { signal })).rawBytes.length
          : Buffer.byteLength(
              JSON.stringify(await callTool(client, 'list_cells', { notebook: briefSid, outputs: 'none' }, signal)),
            );
      lists.push(`${name} list of 10 cells: brief ${brief} B, outputs=none ${none} B (${(brief / none).toFixed(3)})`);
      listed[name] = { brief, none };
    }
    for (const line of lists) console.log(`      ${line}`);
    const over = totals['MCP']!.defaults / totals['HTTP']!.defaults;
    console.log(
      `      MCP / HTTP with the defaults: ${over.toFixed(3)}; with the brief list: ${(totals['MCP']!.brief / totals['HTTP']!.brief).toFixed(3)}`,
    );
    // Held once every figure is printed.
    for (const [name, t] of Object.entries(totals)) {
      const ratio = t.defaults / t.full;
      ok(ratio <= 1 / 3, `${name}: the defaults take ${ratio.toFixed(3)} of the full answers' bytes`);
      const { brief, none } = listed[name]!;
      ok(brief * 3 <= none, `${name}: the brief list is ${brief} B, outputs=none ${none} B`);
    }
    ok(over <= 1.2, `MCP's defaults take ${over.toFixed(3)} of HTTP's bytes`);
  }).timeout(900_000);

  it('answers: an nbformat 4.4 notebook says its ids are not kept in the file; persist-ids upgrades it once the person clicks Upgrade, and the file keeps the ids agents were given', async () => {
    const { signal, note } = checkRun();
    const { client, sandbox } = context();
    const page = sandbox.page;
    const { sid, file } = await openCopy('answers-ids', signal);
    const before = (await client.get(`/notebooks/cells?notebook=${sid}&view=brief`, { signal })).json<{
      notebook: { idsPersist: boolean; idsNote?: string };
      cells: Cell[];
    }>();
    eq(before.notebook.idsPersist, false, 'idsPersist of an nbformat 4.4 notebook');
    match(before.notebook.idsNote ?? '', /nbformat < 4\.5 keeps no cell ids.*POST \/notebooks\/persist-ids/, 'idsNote');
    const ask = async (button: 'Not Now' | 'Upgrade', shot?: string) => {
      const answer = client.post('/notebooks/persist-ids', { notebook: sid }, { signal, timeoutMs: 60_000 });
      const toast = page.locator('.notification-toast', { hasText: 'asks to upgrade' }).first();
      await toast.waitFor({ state: 'visible', timeout: 15_000 });
      includes(await toast.innerText(), 'answers-ids.ipynb to nbformat 4.5', 'the prompt names the notebook');
      if (shot) {
        await sleep(600); // the toast slides in
        await screenshot(page, shot, note);
      }
      await toast.locator('.monaco-button', { hasText: new RegExp(`^${button}$`) }).click({ timeout: 5_000 });
      return answer;
    };
    const declined = await ask('Not Now', 'answers-persist-ids-prompt.png');
    eq(declined.status, 403, `Not Now (${show(declined.text, 300)})`);
    const upgraded = await ask('Upgrade');
    eq(upgraded.status, 200, `Upgrade (${show(upgraded.text, 300)})`);
    deepEq(
      [upgraded.json().upgraded, upgraded.json().notebook.idsPersist, upgraded.json().notebook.idsNote],
      [true, true, undefined],
      'the answer after Upgrade',
    );
    eq((await client.post('/notebooks/save', { notebook: sid }, { signal })).status, 200, 'save');
    const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as {
      nbformat: number;
      nbformat_minor: number;
      cells: { id?: string }[];
    };
    deepEq([saved.nbformat, saved.nbformat_minor], [4, 5], 'nbformat of the saved file');
    deepEq(
      saved.cells.map((c) => c.id),
      before.cells.map((c) => c.id),
      "the file's cell ids are the ones agents were given",
    );
    const after = (await client.get(`/notebooks/cells?notebook=${sid}&view=brief`, { signal })).json<{ cells: Cell[] }>();
    deepEq(
      after.cells.map((c) => c.id),
      before.cells.map((c) => c.id),
      'the ids listed after the upgrade',
    );
  }).timeout(120_000);

  it('answers: GET / lists the routes; an unknown session names the open notebooks; an output id no output had is not "expired"', async () => {
    const { signal } = checkRun();
    const { client, analysis } = context();
    const root = await client.get('/', { signal });
    eq(root.status, 404, 'GET / status');
    const routes = root.json<{ routes: string[] }>().routes;
    for (const route of ['GET /api/sessions', 'POST /api/kernel/execute', 'GET /notebooks/cells', 'POST /notebooks/persist-ids'])
      ok(routes.includes(route), `${route} among ${show(routes, 400)}`);
    const unknown = await client.request({
      method: 'POST',
      path: '/api/kernel/execute',
      body: JSON.stringify({ code: '1' }),
      contentType: 'application/json',
      headers: { 'marimo-session-id': 's_nope00' },
      signal,
    });
    eq(unknown.status, 404, 'unknown session status');
    includes(
      unknown.json<{ detail: string }>().detail,
      `${analysis.session.id} (${analysis.path})`,
      'the 404 names an open notebook',
    );
    const output = await client.get('/notebooks/scratchpad/outputs/nope', { signal });
    eq(output.status, 404, 'unknown output id status');
    match(output.json<{ detail: string }>().detail, /^No output has the id nope/, 'unknown output id');
  });
}
