/**
 * The peers comparison as one table: a column per target, and per bridge target a ratio against
 * the best peer on that row (">1 = we are faster", or lighter, or more runs/s). Written as
 * markdown and as an SVG bar chart of the ratios (log scale, 1× marked).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fmt, type Unit } from './report';

export interface PeerColumn {
  name: string;
  ours: boolean;
  /** Why this target has no figures (it did not start), if so. */
  missing?: string;
}

export interface PeerRow {
  workload: string;
  unit: Unit;
  /** Whether a smaller figure is the better one (time, memory, failures). */
  lowerIsBetter: boolean;
  /** One per column; NaN where there is no figure. */
  values: number[];
  /** One per column: a word on the figure (failures, what came back). */
  notes?: (string | undefined)[];
  /** How the work differs between targets, where it does: such a row gets no ratio. */
  differs?: string;
}

/** ours vs. the best peer, oriented so >1 favours ours; NaN without both figures. */
export function ratio(row: PeerRow, cols: readonly PeerColumn[], ours: number): number {
  if (row.differs) return NaN;
  const peers = row.values.filter((v, i) => !cols[i]!.ours && Number.isFinite(v));
  const mine = row.values[ours]!;
  if (!peers.length || !Number.isFinite(mine)) return NaN;
  const best = row.lowerIsBetter ? Math.min(...peers) : Math.max(...peers);
  if (row.lowerIsBetter) return mine === 0 ? (best === 0 ? 1 : Infinity) : best / mine;
  return best === 0 ? (mine === 0 ? 1 : Infinity) : mine / best;
}

const fmtRatio = (r: number) => (Number.isNaN(r) ? 'n/a' : r === Infinity ? '∞' : `${r >= 10 ? r.toFixed(0) : r.toFixed(2)}×`);

export function renderMarkdown(rows: readonly PeerRow[], cols: readonly PeerColumn[]): string {
  const ours = cols.map((c, i) => (c.ours ? i : -1)).filter((i) => i >= 0);
  const header = ['workload', ...cols.map((c) => c.name), ...ours.map((i) => `${cols[i]!.name} vs best peer`)];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map((_, i) => (i ? ' ---: ' : ' --- ')).join('|')}|`];
  for (const r of rows) {
    const cells = r.values.map((v, i) => {
      const note = r.notes?.[i];
      return `${fmt(v, r.unit)}${note ? ` (${note})` : ''}`;
    });
    const workload = r.differs ? `${r.workload} (work differs: ${r.differs})` : r.workload;
    const ratios = ours.map((i) => (r.differs ? '–' : fmtRatio(ratio(r, cols, i))));
    lines.push(`| ${[workload, ...cells, ...ratios].join(' | ')} |`);
  }
  const missing = cols.filter((c) => c.missing).map((c) => `- ${c.name}: did not run: ${c.missing}`);
  return [
    ...lines,
    '',
    'Ratio: the best peer’s figure over ours for times, memory and failures, ours over the best peer’s for runs/s; >1 = we are faster (or lighter). A row whose work differs between targets has none (–).',
    ...(missing.length ? ['', ...missing] : []),
  ].join('\n');
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Horizontal bars of log10(ratio) about a 1× line, one per row and bridge target. */
export function renderSvg(rows: readonly PeerRow[], cols: readonly PeerColumn[]): string {
  const ours = cols.map((c, i) => (c.ours ? i : -1)).filter((i) => i >= 0);
  const bars = rows
    .filter((r) => !r.differs)
    .flatMap((r) => ours.map((i) => ({ label: `${r.workload} — ${cols[i]!.name}`, value: ratio(r, cols, i) })));
  const [labelW, plotW, barH, top] = [430, 420, 22, 30];
  const span = Math.max(1, ...bars.map((b) => (Number.isFinite(b.value) && b.value > 0 ? Math.abs(Math.log10(b.value)) : 0)));
  const x1 = labelW + plotW / 2;
  const scale = plotW / 2 / Math.ceil(span);
  const body = bars.map((b, k) => {
    const y = top + k * barH;
    const label = `<text x="${labelW - 8}" y="${y + 15}" text-anchor="end">${esc(b.label)}</text>`;
    if (!Number.isFinite(b.value) || b.value <= 0)
      return `${label}<text x="${x1 + 6}" y="${y + 15}">${b.value === Infinity ? '∞' : 'n/a'}</text>`;
    const w = Math.log10(b.value) * scale;
    const fill = b.value >= 1 ? '#2e7d32' : '#c62828';
    return `${label}<rect x="${Math.min(x1, x1 + w)}" y="${y + 3}" width="${Math.max(1, Math.abs(w))}" height="${barH - 6}" fill="${fill}"/><text x="${x1 + w + (w >= 0 ? 4 : -4)}" y="${y + 15}" text-anchor="${w >= 0 ? 'start' : 'end'}">${fmtRatio(b.value)}</text>`;
  });
  const h = top + bars.length * barH + 20;
  const w = labelW + plotW + 60;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${x1}" y="18" text-anchor="middle" font-weight="bold">Agent Bridge vs. the best peer (log scale; &gt;1× = we are faster)</text>`,
    ...body,
    `<line x1="${x1}" y1="${top - 4}" x2="${x1}" y2="${h - 16}" stroke="#333"/>`,
    `<text x="${x1}" y="${h - 4}" text-anchor="middle">1×</text>`,
    '</svg>',
  ].join('\n');
}

/** Writes table.md, ratios.svg and figures.json into `dir`; returns the markdown. */
export function writePeerResults(
  dir: string,
  rows: readonly PeerRow[],
  cols: readonly PeerColumn[],
  extra: Record<string, unknown>,
): string {
  fs.mkdirSync(dir, { recursive: true });
  const md = renderMarkdown(rows, cols);
  fs.writeFileSync(path.join(dir, 'table.md'), `# Agent Bridge and its peers\n\n${md}\n`);
  fs.writeFileSync(path.join(dir, 'ratios.svg'), `${renderSvg(rows, cols)}\n`);
  fs.writeFileSync(path.join(dir, 'figures.json'), `${JSON.stringify({ columns: cols, rows, ...extra }, null, 2)}\n`);
  return md;
}
