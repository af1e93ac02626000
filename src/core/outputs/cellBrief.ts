import type { CellKind, CellService, CellStatus, CellView } from '../model/cellService';
import { answerAt, type OutputDetail } from './outputDetail';

/** Characters of a cell's first line a brief list keeps. */
export const BRIEF_LINE_CHARS = 80;

/**
 * A cell in a brief list (`view=brief`): which it is, how its last run ended, whether its outputs
 * are out of date, and its first line: enough to find the cells to read, run or edit, at a few
 * dozen bytes a cell. Not a read of the cell: an edit still needs the cell read in full first.
 */
export interface CellBrief {
  readonly id: string;
  readonly index: number;
  readonly kind: CellKind;
  /** Code cells only. */
  readonly status?: CellStatus;
  /** Present when its outputs are out of date (cellGraph.ts). */
  readonly stale?: NonNullable<CellView['stale']>;
  /** Its first non-blank line, cut at BRIEF_LINE_CHARS. */
  readonly line: string;
  /** Its lines, when it has more than one. */
  readonly lines?: number;
}

export function briefCell(cell: CellView): CellBrief {
  const all = cell.code.replace(/\n$/, '').split('\n');
  const first = all.find((l) => l.trim()) ?? '';
  return {
    id: cell.id,
    index: cell.index,
    kind: cell.kind,
    ...(cell.execution ? { status: cell.execution.status } : {}),
    ...(cell.stale ? { stale: cell.stale } : {}),
    line: first.length > BRIEF_LINE_CHARS ? `${first.slice(0, BRIEF_LINE_CHARS - 1)}…` : first,
    ...(all.length > 1 ? { lines: all.length } : {}),
  };
}

/**
 * A list of cells as asked: brief (not a read), or whole at an output detail (default summary).
 * A brief list names its notebook briefly too: its session id, its kernel and whether its ids
 * last (GET /notebooks has the rest).
 */
export async function listAnswer(
  cells: CellService,
  notebook: string | undefined,
  { view, outputs }: { view?: 'cells' | 'brief' | undefined; outputs?: OutputDetail | undefined },
): Promise<object> {
  if (view !== 'brief') return answerAt(await cells.list(notebook), outputs ?? 'summary');
  const listed = await cells.list(notebook, { read: false });
  const { uri: _uri, path: _path, notebookType: _type, cellCount: _count, dirty: _dirty, ...brief } = listed.notebook;
  return { notebook: brief, cells: listed.cells.map(briefCell) };
}
