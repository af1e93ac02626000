/** Cells of the notebook as it is now (`start`..`end`) to replace by the original cells at `restore`. */
export interface Replacement {
  readonly start: number;
  readonly end: number;
  /** Indices into the original cells, in order. */
  readonly restore: readonly number[];
}

/**
 * How to take back the steps of a change that were applied before a later one failed, in one
 * edit, by cell identity rather than position (the person may have added or removed cells in
 * between, and those stay): every cell the steps made goes, and every original cell they removed
 * comes back right after the nearest original before it that is still there (or first).
 * `now`: the cells as they are; `originals`: the cells before the first step; `made`: the cells
 * the steps created. Replacements are disjoint, in ascending order, in the indices of `now`.
 */
export function rollbackPlan<T>(now: readonly T[], originals: readonly T[], made: ReadonlySet<T>): Replacement[] {
  const at = new Map(now.map((cell, i) => [cell, i]));
  // Restored cells by the position they go to: after cell `p - 1` of now (0: first).
  const inserts = new Map<number, number[]>();
  let after = 0;
  originals.forEach((cell, k) => {
    const i = at.get(cell);
    if (i !== undefined) {
      after = i + 1;
      return;
    }
    const list = inserts.get(after) ?? [];
    list.push(k);
    inserts.set(after, list);
  });
  const out: Replacement[] = [];
  for (let p = 0; p <= now.length; p++) {
    // Each run of made cells starts at 0 or right after a cell that stays: one replacement there.
    if (p > 0 && made.has(now[p - 1]!)) continue;
    let end = p;
    while (end < now.length && made.has(now[end]!)) end++;
    const restore = inserts.get(p) ?? [];
    if (end > p || restore.length) out.push({ start: p, end, restore });
  }
  return out;
}
