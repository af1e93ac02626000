import type { CellRunResult, CellStatus, CellView, RunHandle } from '../model/cellService';
import type { StaleCell } from '../model/cellGraph';
import type { RunOutcome } from '../outcome';
import { runKind, type OutcomeKind } from '../outcome';
import { answerAt, type CellAnswer, type OutputDetail } from '../outputs/outputDetail';

/** How long a cell run is waited for when the request names no timeout. */
export const DEFAULT_RUN_TIMEOUT_MS = 30_000;

export interface RunOptions {
  wait: boolean;
  timeoutMs: number;
  /** How much of the cells' outputs the answer carries. */
  outputs: OutputDetail;
}

/** One waited run as transports report it. */
export interface RunSummary {
  done: boolean;
  success: boolean | null;
  status: CellStatus;
  /** The cell as the run left it; absent when the answer's `cells` carries it (then `cellId` names it). */
  cell?: CellAnswer;
  cellId?: string;
  alsoRan?: readonly RunSummary[];
  stale?: readonly StaleCell[];
}

export const timeoutDetail = (ms: number, ids: readonly string[]) =>
  `Still running after ${ms} ms: ${ids.join(', ')} (not interrupted: wait again with POST /notebooks/cells/<id>/wait ` +
  '(MCP wait_cell), read the cell with GET /notebooks/cells/<id>, or stop it with POST /notebooks/interrupt)';

const RUN_ENDS: ReadonlySet<CellStatus> = new Set<RunOutcome>(['succeeded', 'failed', 'interrupted', 'timed_out']);

/**
 * The outcome of a wait for a run (or a run of many): `still_running` when the wait ran out, else
 * how the run (the first that did not succeed) ended. A cell with no run to wait for is `ok`.
 */
export function waitedKind(result: { readonly done: boolean; readonly status: CellStatus }): OutcomeKind {
  if (!result.done) return 'still_running';
  return RUN_ENDS.has(result.status) ? runKind(result.status as RunOutcome) : 'ok';
}

/** What waiting for a batch's runs found: the body to answer with, and its outcome. */
export interface Waited<T> {
  body: T & { queued?: string[]; runs?: RunSummary[]; detail?: string; stale?: readonly StaleCell[] };
  kind: OutcomeKind;
}

/**
 * Waits for a batch's runs under one deadline. Not waiting, the body names the queued cells; a
 * wait that runs out leaves the runs going and says which (`timedOut`, with a `detail`).
 */
export async function waitRuns<T extends { cells?: readonly CellView[]; stale?: readonly StaleCell[] }>(
  applied: T,
  handles: readonly RunHandle[],
  options: RunOptions,
): Promise<Waited<T>> {
  if (!handles.length) return { body: answerAt(applied, options.outputs), kind: 'ok' };
  if (!options.wait) return { body: { ...answerAt(applied, options.outputs), queued: handles.map((h) => h.cellId) }, kind: 'ok' };
  const deadline = Date.now() + options.timeoutMs;
  const runs: CellRunResult[] = [];
  for (const handle of handles) runs.push(await handle.wait({ timeoutMs: Math.max(0, deadline - Date.now()), stale: false }));
  // The batch's cells as its runs left them (outputs, run state), not as the edit left them; a
  // run of one of them names it rather than repeat it.
  const after = new Map(runs.map((r) => [r.cell.id, r.cell]));
  const cells = applied.cells?.map((c) => after.get(c.id) ?? c);
  const shown = new Set(cells?.map((c) => c.id));
  // What the edits and the runs that ended left stale, once they ended.
  const ran = runs.filter((r) => r.done).flatMap((r) => [r.cell.id, ...(r.alsoRan ?? []).map((a) => a.cell.id)]);
  const staleAfter = handles[0]!.staleAfter?.bind(handles[0]);
  const stale = ran.length && staleAfter ? await staleAfter([...(applied.cells ?? []).map((c) => c.id), ...ran]) : applied.stale;
  const body = answerAt(
    {
      ...applied,
      ...(cells ? { cells } : {}),
      ...(stale ? { stale } : {}),
      runs: runs.map((r) => ({
        ...(shown.has(r.cell.id) ? { cellId: r.cell.id } : { cell: r.cell }),
        done: r.done,
        success: r.success,
        status: r.status,
        ...(r.alsoRan ? { alsoRan: r.alsoRan } : {}),
      })),
    },
    options.outputs,
  );
  const pending = runs.filter((r) => !r.done).map((r) => r.cell.id);
  const failed = runs.find((r) => r.status !== 'succeeded');
  if (!pending.length) return { body, kind: failed ? waitedKind(failed) : 'ok' };
  return {
    body: { detail: `The edits were applied. ${timeoutDetail(options.timeoutMs, pending)}`, ...body },
    kind: 'still_running',
  };
}
