/**
 * Answer sizes: an analyst's six-step task scripted over HTTP and over MCP, on copies of one
 * pandas notebook with the builtin kernel, once asking for every output whole (`outputs: "full"`,
 * what every answer carried before output detail existed) and once with the defaults. The bytes of
 * the answers are printed side by side with their ratio (over MCP the full figure also counts the
 * structured copy of each answer's JSON that the cell tools sent before they answered once), and the defaults must carry what the
 * agent needs (ids, code, run status, first lines, the error's name and message, the image url).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eq, includes, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { checkRun, context } from './context';
import { callTool } from './jupyter';

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

/** The six steps through one transport; `full` asks for every output whole. */
interface Transport {
  list(full: boolean): Promise<Answer>;
  runAll(full: boolean): Promise<Answer>;
  batch(body: Json, full: boolean): Promise<Answer>;
  image(url: string, cellId: string, full: boolean): Promise<Answer>;
  save(full: boolean): Promise<Answer>;
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
  const detail = (full: boolean) => (full ? { outputs: 'full' } : {});
  const q = `notebook=${encodeURIComponent(sid)}`;
  return {
    list: (full) => answer(client.get(`/notebooks/cells?${q}${full ? '&outputs=full' : ''}`, { signal }), 'list'),
    runAll: (full) =>
      answer(
        client.post(
          '/notebooks/run',
          { notebook: sid, all: true, onError: 'continue', wait: true, timeoutMs: 90_000, ...detail(full) },
          { signal, timeoutMs: 100_000 },
        ),
        'run all',
      ),
    batch: (body, full) =>
      answer(
        client.post('/notebooks/edits', { notebook: sid, ...body, ...detail(full) }, { signal, timeoutMs: 60_000 }),
        'batch',
      ),
    image: (url) => answer(client.get(url, { signal }), 'image'),
    save: () => answer(client.post('/notebooks/save', { notebook: sid }, { signal }), 'save'),
  };
}

function mcp(client: BridgeClient, sid: string, signal: AbortSignal): Transport {
  // `full` also counts the copy of the JSON the answers carried as structured content before.
  const answer = async (name: string, args: Json, full = false) => {
    const result = (await callTool(client, name, { notebook: sid, ...args }, signal, 100_000)) as {
      isError?: boolean;
      content: { type: string; text?: string }[];
    };
    ok(!result.isError, `${name}: ${show(result.content, 300)}`);
    const text = result.content.find((c) => c.type === 'text')?.text ?? '{}';
    const copy = full ? Buffer.byteLength(text) : 0;
    return { bytes: Buffer.byteLength(JSON.stringify(result)) + copy, json: JSON.parse(text) as Json };
  };
  const detail = (full: boolean) => (full ? { outputs: 'full' } : {});
  return {
    list: (full) => answer('list_cells', detail(full), full),
    runAll: (full) => answer('run_cells', { all: true, onError: 'continue', timeoutMs: 90_000, ...detail(full) }, full),
    batch: (body, full) => answer('edit_cells', { ...body, ...detail(full) }, full),
    // MCP reads an image as image content: the cell, whole.
    image: (_url, cellId, full) => answer('get_cell', { ref: cellId }, full),
    save: (full) => answer('save_notebook', {}, full),
  };
}

interface Cell {
  id: string;
  index: number;
  code: string;
  version: number;
  outputs?: { items: { type: string; text?: string; name?: string; message?: string; url?: string }[] }[];
}

/** The six steps; returns each step's bytes and what the defaults' answers held. */
async function sixSteps(t: Transport, full: boolean): Promise<{ bytes: number[]; seen: string }> {
  const listed = await t.list(full);
  const cells = listed.json['cells'] as Cell[];
  const ran = await t.runAll(full);
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
    full,
  );
  const [loop, group, pivot] = [cells[3]!, cells[5]!, cells[6]!];
  const edited = await t.batch(
    {
      ops: [
        { op: 'edit', ref: loop.id, version: loop.version, code: loop.code.replace('300', '200') },
        { op: 'edit', ref: group.id, version: group.version, code: group.code.replace("'count'", "'median'") },
        { op: 'edit', ref: pivot.id, version: pivot.version, code: pivot.code.replace('head(40)', 'head(30)') },
      ],
      run: [loop.id, group.id, pivot.id],
      wait: true,
      timeoutMs: 60_000,
    },
    full,
  );
  const read = await t.image(image.url, chart.id, full);
  const saved = await t.save(full);
  const answers = [listed, ran, created, edited, read, saved];
  return { bytes: answers.map((a) => a.bytes), seen: JSON.stringify(answers.slice(0, 4).map((a) => a.json)) };
}

/** Fails unless the default answers still carry what the agent needs. */
function needed(seen: string): void {
  for (const [what, text] of [
    ['a cell id and its code', 'df.describe()'],
    ['the first printed lines', '0 '],
    ['the failing cell\u2019s error name', '"name":"KeyError"'],
    ['the run statuses', '"status":"failed"'],
    ['the image url', '/outputs/'],
    ['the edited cells\u2019 new output', 'median'],
  ] as const)
    includes(seen, text, `defaults: ${what}`);
}

export function answerChecks(): void {
  it('answers: the six-step task takes at most a third of the bytes with the defaults (HTTP and MCP)', async () => {
    const { signal } = checkRun();
    const { client, workspace } = context();
    const open = async (name: string) => {
      const file = path.join(workspace, `${name}.ipynb`);
      fs.writeFileSync(file, `${JSON.stringify(NOTEBOOK, null, 1)}\n`);
      const r = await client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { signal, timeoutMs: 30_000 });
      eq(r.status, 200, `open ${name} (${show(r.text, 300)})`);
      return r.json<{ session: { id: string } }>().session.id;
    };
    const lines: string[] = [];
    for (const [name, make] of [
      ['HTTP', http],
      ['MCP', mcp],
    ] as const) {
      const full = await sixSteps(make(client, await open(`answers-${name}-full`), signal), true);
      const defaults = await sixSteps(make(client, await open(`answers-${name}-defaults`), signal), false);
      needed(defaults.seen);
      const sum = (b: number[]) => b.reduce((a, n) => a + n, 0);
      const ratio = sum(defaults.bytes) / sum(full.bytes);
      lines.push(
        `${name}: outputs full ${sum(full.bytes)} B [${full.bytes.join(', ')}]; defaults ${sum(defaults.bytes)} B ` +
          `[${defaults.bytes.join(', ')}]; ratio ${ratio.toFixed(3)}`,
      );
      console.log(`      six-step task answer bytes (list, run all, create two, edit+run three, image, save): ${lines.at(-1)}`);
      ok(ratio <= 1 / 3, `${name}: the defaults take ${ratio.toFixed(3)} of the full answers' bytes`);
    }
  }).timeout(600_000);
}
