import { strict as assert } from 'node:assert';
import type { CellSnapshot } from '../../src/core/model/cellService';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { request } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

const CELLS = 7_000;

/** Lookups one request may make: a few passes over the cells. */
const BUDGET = 5 * CELLS;

/**
 * FakeNotebooks whose cell snapshots count every read of a cell's id: each is one lookup. Past
 * the budget a read throws (the request fails), so a lookup per ref per cell fails fast.
 */
class CountingNotebooks extends FakeNotebooks {
  lookups = 0;

  override cells(uri: string): CellSnapshot[] {
    return super.cells(uri).map((cell) => {
      const { id, ...rest } = cell;
      const counted = { ...rest } as CellSnapshot;
      const read = () => {
        if (++this.lookups > BUDGET) throw new Error(`more than ${BUDGET} lookups of cell ids`);
        return id;
      };
      Object.defineProperty(counted, 'id', { enumerable: true, get: read });
      return counted;
    });
  }
}

/** Selections of cells (run many, clear outputs) on a large notebook: refused or resolved without a lookup per ref per cell. */
describe('selections on a large notebook', function () {
  this.timeout(60_000);
  let server: RunningServer;
  let docs: CountingNotebooks;
  let ids: string[];

  const post = async (path: string, body: object) => {
    const res = await request(server.port, {
      method: 'POST',
      path,
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ notebook: NOTEBOOK_A.sessionId, ...body }),
    });
    return { status: res.status, body: JSON.parse(res.body) as { detail?: string; cleared?: string[] } };
  };

  beforeEach(async () => {
    docs = new CountingNotebooks();
    ids = docs.add(
      NOTEBOOK_A,
      Array.from({ length: CELLS }, (_, i) => ({ code: `v${i} = ${i}` })),
    );
    server = await startTestServer({ notebooks: docs, maxBodyBytes: 1024 * 1024 });
  });
  afterEach(() => server.close());

  it('400,000 refs (800 KB) get a 4xx naming the cap before any ref is looked up', async () => {
    for (const path of ['/notebooks/clear-outputs', '/notebooks/run']) {
      docs.lookups = 0;
      const r = await post(path, { cells: Array<number>(400_000).fill(0) });
      assert.ok(r.status === 400 || r.status === 413, `${path}: ${r.status} ${r.body.detail?.slice(0, 200)}`);
      assert.match(r.body.detail ?? '', /at most 10000 cells/);
      assert.equal(docs.lookups, 0, `${path}: cells looked up before the refusal`);
    }
  });

  it('more refs than the notebook has cells get a 400 naming its cell count before any lookup', async () => {
    docs.lookups = 0;
    const r = await post('/notebooks/clear-outputs', { cells: Array<number>(CELLS + 1).fill(0) });
    assert.equal(r.status, 400, r.body.detail);
    assert.match(r.body.detail ?? '', /7001 cells.*has 7000 cells/);
    assert.equal(docs.lookups, 0);
  });

  it('every cell of 7,000 named by id is resolved through one map: lookups grow with the cells, not their square', async () => {
    docs.lookups = 0;
    const r = await post('/notebooks/clear-outputs', { cells: [...ids].reverse() });
    assert.equal(r.status, 200, r.body.detail);
    assert.deepEqual(r.body.cleared, ids);
    assert.ok(docs.lookups <= BUDGET, `${docs.lookups} lookups for ${CELLS} refs`);
  });
});
