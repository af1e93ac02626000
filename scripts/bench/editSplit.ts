/**
 * Inserting a cell against editing one, each split into where its time goes: the extension's
 * spans of each edit (src/core/flow/editSpans.ts, written to a file only when the bench sets
 * AGENT_BRIDGE_EDIT_SPANS) beside the HTTP request's own time, measured here.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { EditSpan } from '../../src/core/flow/editSpans';
import { BenchClient } from './client';
import { writeNotebook } from './notebooks';
import { base, goal, p50, percentile, row, type Row } from './report';
import type { Ctx } from './sections';

const WARMUP = 5;
const RUNS = 30;

/** The parts of one request, ms, in the order they happen (printed in this order). */
export const PARTS = {
  total: 'whole request over HTTP',
  plan: 'ours: cell rules reading and planning',
  check: 'ours: check of the written Python',
  before: 'ours: notebook layer up to applyEdit',
  applyEdit: 'applyEdit: extension host → workbench → back',
  hostCpu: '  of it: extension host CPU (every change listener, ours too)',
  workbench: '  of it: the rest, waiting on the workbench',
  shown: '  of it: until the extension host’s document shows the change',
  echo: '  of it: from the document showing it to applyEdit’s answer',
  after: 'ours: after applyEdit (checkpoint, answer)',
  rest: 'the rest: route, activity record, HTTP',
} as const;
export type Part = keyof typeof PARTS;

/** One request's parts from its HTTP time and the extension's span of it. */
export function splitOf(totalMs: number, span: EditSpan): Record<Part, number> {
  const { plan, check, before, applyEdit, hostCpu, shown, after } = span;
  return {
    total: totalMs,
    plan,
    check,
    before,
    applyEdit,
    hostCpu,
    workbench: applyEdit - hostCpu,
    shown,
    echo: applyEdit - shown,
    after,
    rest: totalMs - plan - check - before - applyEdit - after,
  };
}

/** The table's rows: p50 and p95 of each part of inserts, each beside the same figure for edits. */
export function splitRows(section: string, inserts: Record<Part, number>[], edits: Record<Part, number>[]): Row[] {
  const at = (xs: Record<Part, number>[], part: Part, p: number) =>
    percentile(
      xs.map((x) => x[part]),
      p,
    );
  const rows: Row[] = [];
  for (const part of Object.keys(PARTS) as Part[])
    for (const p of [50, 95]) {
      const [insert, edit] = [at(inserts, part, p), at(edits, part, p)];
      const target = part === 'total' && p === 50 ? goal('insert ≤ 2× edit', insert <= 2 * edit) : undefined;
      rows.push(row(section, `insert: ${PARTS[part]}, p${p}`, insert, 'ms', { baseline: base('edit', edit), target }));
    }
  return rows;
}

/** The spans the extension wrote since byte `from` of its file, and where the file ends. */
function newSpans(file: string, from: number): { spans: EditSpan[]; end: number } {
  const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  const lines = text.slice(from).split('\n').filter(Boolean);
  return { spans: lines.map((l) => JSON.parse(l) as EditSpan), end: text.length };
}

/**
 * Inserts (each deleted again, untimed) and edits of one cell's text, interleaved, on a small
 * notebook in front; each writes code not written before, so both pay the code check alike.
 */
export async function insertVsEdit(ctx: Ctx): Promise<void> {
  ctx.say(`insert vs edit: ${WARMUP} + ${RUNS} of each, interleaved, with the extension's spans`);
  const file = path.join(path.dirname(ctx.listFile), 'edits.ipynb');
  writeNotebook(file, 10, true);
  // Its kernel running, as where an agent works: the code check is then answered by the kernel.
  const nb = await ctx.open(file, 'builtin');
  const client = new BenchClient(ctx.url, ctx.token);
  const q = `?notebook=${encodeURIComponent(nb.sid)}`;
  const listed = await client.request('GET', `/notebooks/cells${q}`);
  const target = (JSON.parse(listed.text) as { cells: { id: string }[] }).cells[5]!.id;
  let offset = newSpans(ctx.spansFile, 0).end;
  const parts: Record<'insert' | 'edit', Record<Part, number>[]> = { insert: [], edit: [] };
  /** Times one request and takes the extension's span of `kind` it made. */
  const timed = async (
    kind: 'insert' | 'edit',
    send: () => Promise<{ status: number; text: string; ms: number }>,
    counted: boolean,
  ) => {
    const r = await send();
    const { spans, end } = newSpans(ctx.spansFile, offset);
    offset = end;
    const span = spans.find((s) => s.kind === kind);
    if (r.status >= 300 || !span) {
      ctx.problems.push(`${kind}: ${r.status} ${r.text.slice(0, 200)}${span ? '' : ' (no span from the extension)'}`);
      return r.text;
    }
    if (counted) parts[kind].push(splitOf(r.ms, span));
    return r.text;
  };
  let n = 0;
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const counted = i >= WARMUP;
    const insert = async () => {
      const text = await timed(
        'insert',
        () => client.request('POST', '/notebooks/cells', { notebook: nb.sid, code: `y = ${++n}`, index: 3 }),
        counted,
      );
      const id = (JSON.parse(text) as { cell?: { id: string } }).cell?.id;
      if (id) await client.request('DELETE', `/notebooks/cells/${encodeURIComponent(id)}${q}`);
      // The delete's own span is not an insert or an edit: read past it.
      offset = newSpans(ctx.spansFile, offset).end;
    };
    const edit = () =>
      timed(
        'edit',
        () =>
          client.request('PATCH', `/notebooks/cells/${encodeURIComponent(target)}`, {
            notebook: nb.sid,
            code: `x = ${1000 + ++n}`,
          }),
        counted,
      );
    // Rotate which goes first, so load from elsewhere hits both alike.
    if (i % 2) await insert().then(edit);
    else await edit().then(insert);
  }
  await client.close();
  ctx.rows.push(...splitRows('insert vs edit', parts.insert, parts.edit));
  const [insert, edit] = [p50(parts.insert.map((p) => p.total)), p50(parts.edit.map((p) => p.total))];
  ctx.say(`insert vs edit: p50 ${insert.toFixed(1)} ms vs ${edit.toFixed(1)} ms`);
}
