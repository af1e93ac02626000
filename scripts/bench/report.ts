/** The benchmark's figures: the table, the JSON file, and deltas against an earlier file. */
import * as fs from 'node:fs';

export type Unit = 'ms' | 'us' | 's' | 'MB' | 'KB' | 'B' | 'runs/s' | 'count';

/** One line of the table. `id` is the stable key `--compare` matches rows by. */
export interface Row {
  id: string;
  section: string;
  figure: string;
  value: number;
  unit: Unit;
  /** Lower is better for times and sizes; higher for throughput. */
  better: 'lower' | 'higher';
  /** The same thing measured without the bridge, in the same run. */
  baseline?: { label: string; value: number };
  /** value / baseline.value */
  ratio?: number;
  /** The target, informational only: nothing fails on it. */
  target?: { text: string; met: boolean };
  note?: string;
}

export interface Results {
  version: 1;
  startedAt: string;
  finishedAt: string;
  durationS: number;
  git: { commit: string; dirty: boolean };
  machine: Record<string, unknown>;
  rows: Row[];
  details: Record<string, unknown>;
}

export function fmt(value: number, unit: Unit): string {
  if (!Number.isFinite(value)) return 'n/a';
  switch (unit) {
    case 'ms':
      return `${value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)} ms`;
    case 'us':
      return `${value < 10 ? value.toFixed(2) : value.toFixed(1)} µs`;
    case 's':
      return `${value.toFixed(2)} s`;
    case 'MB':
      return `${value.toFixed(1)} MB`;
    case 'KB':
      return `${value.toFixed(1)} KB`;
    case 'B':
      return `${Math.round(value).toLocaleString('en-US')} B`;
    case 'runs/s':
      return `${value.toFixed(1)} runs/s`;
    case 'count':
      return String(Math.round(value));
  }
}

const ratioText = (r: number | undefined) =>
  r === undefined || !Number.isFinite(r) ? '' : `${r < 10 ? r.toFixed(2) : r.toFixed(1)}×`;

function table(header: string[], body: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 || i === 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function renderTable(rows: readonly Row[]): string {
  const body: string[][] = [];
  let section = '';
  for (const r of rows) {
    const first = r.section === section ? '' : r.section;
    section = r.section;
    body.push([
      first,
      r.figure,
      fmt(r.value, r.unit),
      r.baseline ? `${fmt(r.baseline.value, r.unit)} ${r.baseline.label}` : '',
      ratioText(r.ratio),
      r.target ? `${r.target.met ? 'met' : 'MISSED'} (${r.target.text})` : '',
    ]);
  }
  const notes = rows.filter((r) => r.note).map((r) => `  ${r.section} / ${r.figure}: ${r.note}`);
  return (
    table(['section', 'figure', 'bridge', 'baseline (same run)', 'ratio', 'target'], body) +
    (notes.length ? `\nnotes:\n${notes.join('\n')}` : '')
  );
}

export function writeResults(dir: string, results: Results): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = `${dir}/${results.startedAt.replace(/[:.]/g, '-')}.json`;
  fs.writeFileSync(file, JSON.stringify(results, null, 2) + '\n');
  return file;
}

export function readResults(file: string): Results {
  const data = JSON.parse(fs.readFileSync(file, 'utf8')) as Results;
  if (data.version !== 1 || !Array.isArray(data.rows)) throw new Error(`${file} is not a bench results file`);
  return data;
}

/** Per row present in either file: before, now, the change, and whether it is better or worse. */
export function renderCompare(before: Results, now: Results, beforeName: string): string {
  const old = new Map(before.rows.map((r) => [r.id, r]));
  const body: string[][] = [];
  for (const r of now.rows) {
    const o = old.get(r.id);
    old.delete(r.id);
    if (!o) {
      body.push([r.section, r.figure, '(new)', fmt(r.value, r.unit), '', '', '']);
      continue;
    }
    const delta = r.value - o.value;
    const pct = o.value !== 0 ? (delta / Math.abs(o.value)) * 100 : NaN;
    const sign = (x: number) => (x > 0 ? '+' : '');
    const moved = Number.isFinite(pct) && Math.abs(pct) >= 5;
    const verdict = !moved ? '' : delta < 0 === (r.better === 'lower') ? 'better' : 'worse';
    const base = o.baseline && r.baseline ? `${fmt(o.baseline.value, r.unit)} → ${fmt(r.baseline.value, r.unit)}` : '';
    body.push([
      r.section,
      r.figure,
      fmt(o.value, o.unit),
      fmt(r.value, r.unit),
      Number.isFinite(pct) ? `${sign(pct)}${pct.toFixed(1)}%` : '',
      verdict,
      base,
    ]);
  }
  for (const o of old.values()) body.push([o.section, o.figure, fmt(o.value, o.unit), '(gone)', '', '', '']);
  const load = (r: Results) =>
    Array.isArray(r.machine['loadavgStart']) ? (r.machine['loadavgStart'] as number[]).join(' ') : '?';
  return `Δ against ${beforeName} (${before.startedAt}, ${before.git.commit.slice(0, 8)}${before.git.dirty ? '+dirty' : ''}; load ${load(before)} then, ${load(now)} now):\n${table(
    ['section', 'figure', 'before', 'now', 'Δ', '', 'baseline before → now'],
    body,
  )}`;
}
