/**
 * What presence adds to a request: the Presence record's calls the cell service makes on each
 * (noting the read, write or run; asking, for each cell view it answers, whether the person is
 * typing there; a write's check of the person's cells), timed in this process on a busy record:
 * 8 agents in a 1,000-cell notebook, runs going, the person's 256 remembered cells. The requests'
 * own work (the notebook, HTTP) is the baseline measured by the other sections; this is the
 * difference presence makes, which nothing else in a request waits on. The person's view redraws
 * (at most every 150 ms, off the request) read `marks` once per visible cell: timed for 30.
 */
import { Presence } from '../../src/core/agents/presence';
import { Ticket } from '../../src/core/model/runTicket';
import type { Reader } from '../../src/core/model/versions';
import { goal, p50, percentile, row, type Row } from './report';

const NB = 'file:///bench/presence.ipynb';
const CELLS = Array.from({ length: 1_000 }, (_, i) => `cell-${i}`);
const AGENTS: Reader[] = Array.from({ length: 8 }, (_, k) => ({
  key: `claim:agent-${k}`,
  label: `an agent that says it is agent-${k}`,
}));
const RUNS = 2_000;
const TARGET_MS = 1;

/** Times `step` RUNS times after a warm-up; milliseconds each. */
function time(step: (i: number) => void): number[] {
  for (let i = 0; i < 200; i++) step(i);
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    step(i);
    out.push(performance.now() - start);
  }
  return out;
}

export async function presenceCost(say: (m: string) => void): Promise<Row[]> {
  say(`presence: the record's work per request, ${AGENTS.length} agents in a ${CELLS.length}-cell notebook, ${RUNS} times each`);
  const presence = new Presence();
  let heard = 0;
  presence.onDidChange(() => heard++); // the person's view only notes that a redraw is due
  AGENTS.forEach((agent, k) => presence.ran(agent, NB, [new Ticket(`run-${k}`, CELLS[k * 100]!)]));
  for (let i = 0; i < 256; i++) presence.typed(NB, CELLS[(i * 7) % CELLS.length]!);
  presence.selected(NB, [CELLS[3]!]);
  const agent = (i: number) => AGENTS[i % AGENTS.length]!;
  const cell = (i: number) => CELLS[(i * 13) % CELLS.length]!;
  const figures: [string, number[]][] = [
    // GET a cell: the read noted, one view asked about.
    ['GET a cell', time((i) => (presence.read(agent(i), NB, cell(i)), presence.personTyping(NB, cell(i))))],
    // GET the cells: the read noted, every view asked about.
    ['GET 1,000 cells', time((i) => (presence.read(agent(i), NB, null), CELLS.forEach((c) => presence.personTyping(NB, c))))],
    // PATCH: the person's check of the cell, the write noted, the answer's view.
    [
      'PATCH a cell',
      time(
        (i) => (presence.personTyping(NB, cell(i)), presence.wrote(agent(i), NB, [cell(i)]), presence.personTyping(NB, cell(i))),
      ),
    ],
  ];
  // A run: its ticket followed until it ends (they end after, so the record stays as busy).
  const tickets: Ticket[] = [];
  figures.push([
    'run a cell',
    time((i) => presence.ran(agent(i), NB, [tickets[tickets.push(new Ticket(`r-${i}`, cell(i))) - 1]!])),
  ]);
  for (const ticket of tickets) ticket.step('ended');
  await Promise.all(tickets.map((t) => t.ended));
  const rows = figures.map(([what, ms]) =>
    row('presence', `${what}: presence's work, p50 (p99 ${percentile(ms, 99).toFixed(3)} ms)`, p50(ms), 'ms', {
      target: goal(`≤ ${TARGET_MS} ms`, p50(ms) <= TARGET_MS),
    }),
  );
  const ids = CELLS.map((id) => ({ id, execution: { status: 'idle' as const } }));
  const answer = time((i) => presence.answer({ uri: NB, sessionId: 's', path: null }, ids, agent(i)));
  rows.push(row('presence', 'GET /notebooks/presence: the answer, p50', p50(answer), 'ms'));
  const redraw = time(() => {
    for (let c = 0; c < 30; c++) presence.marks(NB).filter((m) => m.cell === CELLS[c]);
  });
  rows.push(
    row('presence', 'a redraw of 30 visible cells (off the request), p50', p50(redraw), 'ms', { note: `${heard} changes heard` }),
  );
  return rows;
}
