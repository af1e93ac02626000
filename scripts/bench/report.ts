/** The benchmark's figures: percentiles, rows, the printed table and the JSON file. */
import * as fs from 'node:fs';

export type Unit = 'ms' | 'MB' | 'B' | 'runs/s' | 'count';

/** One line of the table. Nothing fails on a target: it is printed as met or MISSED. */
export interface Row {
  section: string;
  figure: string;
  /** NaN with `na` set when the figure could not be taken. */
  value: number;
  unit: Unit;
  /** The same thing without the bridge (or the bridge's cheaper path), measured in the same run. */
  baseline?: { label: string; value: number };
  target?: { text: string; met: boolean };
  note?: string;
  /** Why there is no figure ("n/a: ..."). */
  na?: string;
}

export function row(section: string, figure: string, value: number, unit: Unit, more: Partial<Row> = {}): Row {
  return { section, figure, value, unit, ...more };
}
export const base = (label: string, value: number) => ({ label, value });
export const goal = (text: string, met: boolean) => ({ text, met });

/** Nearest-rank percentile. */
export function percentile(samples: readonly number[], p: number): number {
  const s = samples.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]! : NaN;
}

export const p50 = (samples: readonly number[]) => percentile(samples, 50);

export function fmt(value: number, unit: Unit): string {
  if (!Number.isFinite(value)) return 'n/a';
  switch (unit) {
    case 'ms':
      return `${value < 1 ? value.toFixed(3) : value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)} ms`;
    case 'MB':
      return `${value.toFixed(1)} MB`;
    case 'B':
      return `${Math.round(value).toLocaleString('en-US')} B`;
    case 'runs/s':
      return `${value.toFixed(1)} runs/s`;
    case 'count':
      return String(Math.round(value));
  }
}

const ratio = (r: Row) =>
  r.baseline && r.baseline.value && Number.isFinite(r.value / r.baseline.value)
    ? `${(r.value / r.baseline.value).toFixed(2)}×`
    : '';

export function renderTable(rows: readonly Row[]): string {
  const header = ['section', 'figure', 'bridge', 'baseline (same run)', 'ratio', 'target'];
  const cells = rows.map((r, i) => [
    i > 0 && rows[i - 1]!.section === r.section ? '' : r.section,
    r.figure,
    fmt(r.value, r.unit),
    r.baseline ? `${fmt(r.baseline.value, r.unit)} ${r.baseline.label}` : '',
    ratio(r),
    r.target ? `${r.target.met ? 'met' : 'MISSED'} (${r.target.text})` : '',
  ]);
  const full = cells.filter((_, i) => !rows[i]!.na);
  const widths = header.map((h, c) => Math.max(h.length, ...full.map((line) => line[c]!.length)));
  const line = (l: string[]) =>
    l
      .map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  const body = cells.map((l, i) => {
    const na = rows[i]!.na;
    return na ? `${l[0]!.padEnd(widths[0]!)}  ${l[1]!.padEnd(widths[1]!)}  n/a: ${na}` : line(l);
  });
  const notes = rows.filter((r) => r.note).map((r) => `  ${r.figure}: ${r.note}`);
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body, ...(notes.length ? ['notes:', ...notes] : [])].join(
    '\n',
  );
}

/** Writes `<dir>/<started at>.json` with every row and what the run knew of the machine. */
export function writeResults(dir: string, startedAt: string, data: Record<string, unknown>): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = `${dir}/${startedAt.replace(/[:.]/g, '-')}.json`;
  fs.writeFileSync(file, `${JSON.stringify({ startedAt, ...data }, null, 2)}\n`);
  return file;
}
