/**
 * Code mode's side of the one cell-op planner: a block of calls an agent queued in the kernel
 * (`ctx.create_cell`, `edit_cell`, ...) replayed on the notebook's layout and expressed as ONE
 * batch that `planBatch` (batch.ts) then validates and turns into one change, exactly as a REST
 * batch. Pure: no kernel, no editor.
 */
import { z } from 'zod';
import type { BatchOp, CellKind, CellRef } from '../model/cellService';
import { kind, ref } from './cellSchemas';
import { BridgeError } from '../bridgeError';
import { parseCellRef, resolveCellIndex } from './refs';

/** One queued call of a block, as the kernel module sends it. */
export const blockOp = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('create'),
    key: z.string().min(1),
    code: z.string(),
    kind: kind.optional(),
    language: z.string().min(1).optional(),
    before: ref.optional(),
    after: ref.optional(),
  }),
  z.strictObject({ op: z.literal('edit'), ref, code: z.string() }),
  z.strictObject({ op: z.literal('delete'), ref }),
  z.strictObject({ op: z.literal('move'), ref, before: ref.optional(), after: ref.optional() }),
]);

export type BlockOp = z.infer<typeof blockOp>;

/** A cell as the planner of a block needs it. */
export interface LayoutCell {
  readonly id: string;
  readonly kind: CellKind;
  readonly language: string;
}

export interface BlockPlan {
  /** One batch for CellService.batch, refs to existing cells only. */
  readonly batch: BatchOp[];
  /** For each batch op, the block call it comes from (to name it in messages). */
  readonly origins: string[];
  /** For each block op, the cell it concerns: an existing id, a provisional key, or null. */
  readonly targets: (string | null)[];
  /** Provisional keys of the created cells that survive the block, in notebook order. */
  readonly createdInOrder: string[];
  /** Cells to run after the batch, in order: existing ids or provisional keys. */
  readonly runs: string[];
}

interface Entry {
  readonly id: string;
  readonly provisional: boolean;
  moved: boolean;
}

const bad = (where: string, detail: string) => new BridgeError('bad_input', `${where}: ${detail}`);

function callName(op: BlockOp): string {
  const fn = { create: 'create_cell', edit: 'edit_cell', delete: 'delete_cell', move: 'move_cell' }[op.op];
  return op.op === 'create' ? `ctx.${fn}() (${op.key})` : `ctx.${fn}(${JSON.stringify(op.ref)})`;
}

/**
 * Replays a block on the notebook's layout and expresses the outcome as one batch: deletes and
 * edits by id (the last edit of a cell wins; edits of cells the block creates go into their
 * create), moves of existing cells in final order, each after the existing cell before it, and
 * created cells as runs inserted (in reverse) after the existing cell they follow. Refs name
 * cells as the notebook is now; positions are resolved as the preceding calls left it.
 */
export function planBlock(
  layout: readonly LayoutCell[],
  ops: readonly BlockOp[],
  run: readonly CellRef[],
  options: { force: boolean; notebook: string },
): BlockPlan {
  const layoutIds = layout.map((c) => c.id);
  const byId = new Map(layout.map((c) => [c.id, c]));
  const entries: Entry[] = layout.map((c) => ({ id: c.id, provisional: false, moved: false }));
  const creates = new Map<string, { code: string; kind: CellKind; language: string | undefined; alive: boolean }>();
  const edits = new Map<string, { code: string; origin: string }>();
  const deletes = new Map<string, string>();
  const targets: (string | null)[] = [];

  const resolve = (r: CellRef, where: string, field = ''): string => {
    const at = field ? `${where} ${field}` : where;
    const parsed = parseCellRef(r);
    let id: string;
    if ('index' in parsed || byId.has(parsed.id)) {
      try {
        id = layoutIds[resolveCellIndex(layoutIds, r, options.notebook)]!;
      } catch (error) {
        if (error instanceof BridgeError) throw new BridgeError(error.kind, `${at}: ${error.detail}`, error.extra);
        throw error;
      }
    } else if (creates.has(parsed.id)) {
      id = parsed.id;
    } else {
      throw new BridgeError(
        'not_found',
        `${at}: no cell '${parsed.id}' in ${options.notebook}` +
          (parsed.id.startsWith('new-')
            ? ' (ids create_cell returns exist once their block is applied; a block that raised created nothing)'
            : ''),
      );
    }
    if (!entries.some((e) => e.id === id)) throw bad(at, `cell ${id} is deleted earlier in this block`);
    return id;
  };
  const position = (p: { before?: CellRef | undefined; after?: CellRef | undefined }, where: string): number => {
    if (p.before !== undefined && p.after !== undefined) throw bad(where, 'give before= or after=, not both');
    if (p.before !== undefined) {
      const id = resolve(p.before, where, 'before=');
      return entries.findIndex((e) => e.id === id);
    }
    if (p.after !== undefined) {
      const id = resolve(p.after, where, 'after=');
      return entries.findIndex((e) => e.id === id) + 1;
    }
    return entries.length;
  };

  for (const op of ops) {
    const where = callName(op);
    switch (op.op) {
      case 'create': {
        if (creates.has(op.key) || byId.has(op.key)) throw bad(where, `the id ${op.key} is already taken`);
        const at = position(op, where);
        const kind = op.kind ?? 'code';
        creates.set(op.key, { code: op.code, kind, language: op.language, alive: true });
        entries.splice(at, 0, { id: op.key, provisional: true, moved: false });
        targets.push(op.key);
        break;
      }
      case 'edit': {
        const id = resolve(op.ref, where);
        const created = creates.get(id);
        if (created) created.code = op.code;
        else edits.set(id, { code: op.code, origin: where });
        targets.push(id);
        break;
      }
      case 'delete': {
        const id = resolve(op.ref, where);
        entries.splice(
          entries.findIndex((e) => e.id === id),
          1,
        );
        const created = creates.get(id);
        if (created) created.alive = false;
        else {
          deletes.set(id, where);
          edits.delete(id);
        }
        targets.push(id);
        break;
      }
      case 'move': {
        if (op.before === undefined && op.after === undefined) throw bad(where, 'give before= or after=');
        const id = resolve(op.ref, where);
        const anchor = op.before ?? op.after;
        if (anchor !== undefined && resolve(anchor, where, op.before !== undefined ? 'before=' : 'after=') === id)
          throw bad(where, 'a cell cannot move next to itself');
        const [entry] = entries.splice(
          entries.findIndex((e) => e.id === id),
          1,
        );
        entries.splice(position(op, where), 0, entry!);
        if (!entry!.provisional) entry!.moved = true;
        targets.push(id);
        break;
      }
    }
  }

  const runs: string[] = [];
  run.forEach((r) => {
    const where = `ctx.run_cell(${JSON.stringify(r)})`;
    const id = resolve(r, where);
    const kindOf = creates.get(id)?.kind ?? byId.get(id)?.kind;
    if (kindOf !== 'code') throw bad(where, `cell ${id} is a markup cell; only code cells run`);
    if (!runs.includes(id)) runs.push(id);
  });

  const guard = options.force ? { force: true } : {};
  const batch: BatchOp[] = [];
  const origins: string[] = [];
  for (const [id, origin] of deletes) {
    batch.push({ op: 'delete', ref: id, ...guard });
    origins.push(origin);
  }
  for (const [id, edit] of edits) {
    batch.push({ op: 'edit', ref: id, code: edit.code, ...guard });
    origins.push(edit.origin);
  }
  let previous: string | undefined;
  for (const entry of entries) {
    if (entry.provisional) continue;
    if (entry.moved) {
      batch.push({ op: 'move', ref: entry.id, ...(previous === undefined ? { to: 0 } : { after: previous }) });
      origins.push(`ctx.move_cell(${JSON.stringify(entry.id)})`);
    }
    previous = entry.id;
  }
  let anchor: string | undefined;
  let pending: string[] = [];
  const place = () => {
    for (const key of pending.reverse()) {
      const c = creates.get(key)!;
      batch.push({
        op: 'create',
        code: c.code,
        kind: c.kind,
        ...(c.language !== undefined ? { language: c.language } : {}),
        ...(anchor === undefined ? { index: 0 } : { after: anchor }),
      });
      origins.push(`ctx.create_cell() (${key})`);
    }
    pending = [];
  };
  for (const entry of entries) {
    if (entry.provisional) pending.push(entry.id);
    else {
      place();
      anchor = entry.id;
    }
  }
  place();

  return {
    batch,
    origins,
    targets,
    createdInOrder: entries.filter((e) => e.provisional).map((e) => e.id),
    runs,
  };
}
