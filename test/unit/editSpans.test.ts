import { strict as assert } from 'node:assert';
import { editKind, EditSpans, type EditSpan, type SpanClock } from '../../src/core/flow/editSpans';
import { PARTS, splitOf, splitRows } from '../../scripts/bench/editSplit';

/** A clock the test moves by hand: wall and CPU time apart. */
function handClock(): SpanClock & { wall: number; used: number } {
  const c = { wall: 0, used: 0, now: () => c.wall, cpu: () => c.used };
  return c;
}

describe('edit spans (src/core/flow/editSpans.ts)', () => {
  it('splits one edit into before, applyEdit with its host CPU, and after', () => {
    const clock = handClock();
    const got: EditSpan[] = [];
    const watch = new EditSpans((s) => got.push(s), clock).start();
    clock.wall += 2;
    watch.checking();
    clock.wall += 30;
    watch.checked();
    clock.wall += 1;
    clock.used += 1.5;
    watch.applying();
    clock.wall += 98;
    watch.shown();
    clock.wall += 2;
    watch.shown();
    clock.used += 7;
    watch.applied();
    clock.wall += 0.5;
    watch.end('insert');
    assert.deepEqual(got, [{ kind: 'insert', plan: 2, check: 30, before: 1, applyEdit: 100, hostCpu: 7, shown: 98, after: 0.5 }]);
  });

  it('reports no write that applied nothing', () => {
    const got: EditSpan[] = [];
    const watch = new EditSpans((s) => got.push(s), handClock()).start();
    watch.checking();
    watch.checked();
    watch.end('edit');
    assert.deepEqual(got, []);
  });

  it('measures nothing and reports nothing without a sink', () => {
    let reads = 0;
    const clock: SpanClock = { now: () => ++reads, cpu: () => ++reads };
    const watch = new EditSpans(undefined, clock).start();
    watch.checking();
    watch.checked();
    watch.applying();
    watch.shown();
    watch.applied();
    watch.end('edit');
    assert.equal(reads, 0);
  });

  it('calls an edit that adds new cells an insert, one of text only an edit, the rest other', () => {
    const cell = (copyOf?: number) => ({ copyOf });
    assert.equal(editKind({ splices: [{ cells: [cell()] }], texts: [], metadata: [] }), 'insert');
    assert.equal(editKind({ splices: [], texts: [{}], metadata: [] }), 'edit');
    assert.equal(editKind({ splices: [{ cells: [] }], texts: [], metadata: [] }), 'other'); // a delete
    assert.equal(editKind({ splices: [{ cells: [cell(2)] }], texts: [], metadata: [] }), 'other'); // a move
    assert.equal(editKind({ splices: [], texts: [{}], metadata: [{}] }), 'other');
  });
});

describe("the bench's insert vs edit split (scripts/bench/editSplit.ts)", () => {
  const span = (applyEdit: number, hostCpu: number): EditSpan => ({
    kind: 'insert',
    plan: 0.5,
    check: 3,
    before: 1,
    applyEdit,
    hostCpu,
    shown: applyEdit - 1,
    after: 0.5,
  });

  it('derives the workbench wait and the rest of the request from the HTTP time', () => {
    assert.deepEqual(splitOf(110, span(100, 6)), {
      total: 110,
      plan: 0.5,
      check: 3,
      before: 1,
      applyEdit: 100,
      hostCpu: 6,
      workbench: 94,
      shown: 99,
      echo: 1,
      after: 0.5,
      rest: 5,
    });
  });

  it('prints p50 and p95 of every part for inserts beside edits, with the 2× target on the whole request', () => {
    const inserts = [120, 130, 140].map((t) => splitOf(t, span(t - 15, 5)));
    const edits = [10, 20, 30].map((t) => splitOf(t, span(t - 5, 2)));
    const rows = splitRows('s', inserts, edits);
    assert.equal(rows.length, Object.keys(PARTS).length * 2);
    const total50 = rows.find((r) => r.figure === `insert: ${PARTS.total}, p50`)!;
    assert.equal(total50.value, 130);
    assert.deepEqual(total50.baseline, { label: 'edit', value: 20 });
    assert.deepEqual(total50.target, { text: 'insert ≤ 2× edit', met: false });
    const wb95 = rows.find((r) => r.figure === `insert: ${PARTS.workbench}, p95`)!;
    assert.equal(wb95.value, 120);
    assert.equal(wb95.baseline?.value, 23);
    assert.equal(rows.filter((r) => r.target).length, 1);
  });
});
