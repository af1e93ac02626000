/**
 * Presence: where each agent works in a notebook right now, and where the person is. Derived from
 * what is already there, never asked for: the cell service notes the cells an agent's request
 * reads, writes or runs (with the run's ticket, which says when it ends), the activity record
 * the agents' scratchpad runs, and the editor the person's keystrokes and selections. Noting is a
 * few map writes; nothing here waits or blocks a request. The person's views (cell status items,
 * the notebook's agent count, the activity view) and the agents' `GET /notebooks/presence` read it.
 */
import type { ActionEnd, ActivitySink, AgentAction } from './accessPolicy';
import { BridgeError } from '../bridgeError';
import type { ExecutionStatus } from '../model/cellService';
import type { AgentVerb, CellRefView, PresenceAnswer } from '../model/presenceAnswer';
import type { RunPhase, RunTicket } from '../model/runTicket';
import { KERNEL_READER, type Reader } from '../model/versions';

/** How long a read or an edit shows on its cell. */
export const MARK_FADE_MS = 5_000;
/** How long after its last request an agent still counts as active in a notebook (runs keep it active). */
export const ACTIVE_MS = 30_000;
/** How long the person's selections and keystrokes are reported to agents. */
export const PERSON_RECENT_MS = 30_000;
/** A write to a cell the person typed into this recently is refused (unless forced). */
export const PERSON_EDITING_MS = 10_000;
/** Agents remembered per notebook at most (the least recently active go first). */
const MAX_AGENTS = 64;
/** Cells of the person's remembered per notebook at most (the oldest go first). */
const MAX_PERSON_CELLS = 256;

interface AgentState {
  readonly key: string;
  name: string;
  /** Its latest request: what it did, to which cell (null: the notebook as a whole), when. */
  last: { verb: AgentVerb; cell: string | null; at: number };
  /** Its cell runs that have not ended, by run id. */
  readonly runs: Map<string, RunTicket>;
  /** Its scratchpad runs under way, by action id. */
  readonly scratchpads: Set<number>;
}

interface PersonCell {
  selectedAt?: number;
  typedAt?: number;
}

interface NotebookState {
  /** Least recently active first. */
  readonly agents: Map<string, AgentState>;
  /** Least recently touched first. */
  readonly person: Map<string, PersonCell>;
  /** The cells selected in the person's editor now. */
  selection: ReadonlySet<string>;
}

/** A cell the person typed in `ms` ago (index: before the batch). */
export interface PersonTyping {
  readonly id: string;
  readonly index: number;
  readonly ms: number;
}

/** An agent's write that landed, by `force`, on cells the person was typing in. */
export interface ForcedWrite {
  readonly notebook: string;
  readonly agent: string;
  readonly cells: readonly PersonTyping[];
}

/** What a cell shows now: one agent and what it does there. */
export interface CellMark {
  readonly cell: string;
  readonly agent: string;
  readonly verb: AgentVerb;
  /** For a run: queued or running. */
  readonly phase?: 'queued' | 'running';
}

/** An agent active in a notebook: what it works on now, or what it did last (`secondsAgo` before). */
export interface PresentAgent {
  readonly key: string;
  readonly name: string;
  readonly verb: AgentVerb;
  /** The cell's id; null: the notebook as a whole (a list of its cells, a scratchpad run). */
  readonly cell: string | null;
  /** Whether it does that now (a read or edit of the last few seconds, a run going); else it is what it did last. */
  readonly now: boolean;
  readonly secondsAgo: number;
  /** The cells its runs are on (queued or running). */
  readonly running: readonly string[];
}

const seconds = (ms: number) => Math.max(0, Math.round(ms / 1000));

/**
 * Who is where, per notebook (by uri). Agents are told apart by their reader key (clients.ts),
 * shown by its label. Listeners hear of the agents' changes (the person's views redraw); the
 * person's own keystrokes, which agents read when they ask, are not announced.
 */
export class Presence implements ActivitySink {
  private readonly notebooks = new Map<string, NotebookState>();
  private readonly listeners = new Set<(notebook: string) => void>();
  private readonly forcedListeners = new Set<(forced: ForcedWrite) => void>();

  constructor(
    /** The uri of the notebook an action names (session id, path or uri), if it is open. */
    private readonly resolve: (named: string | undefined) => string | undefined = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** Calls `listener` with the notebook's uri when an agent there starts or stops something; returns its removal. */
  onDidChange(listener: (notebook: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` when an agent's forced write lands on cells the person is typing in; returns its removal. */
  onForcedWrite(listener: (forced: ForcedWrite) => void): () => void {
    this.forcedListeners.add(listener);
    return () => this.forcedListeners.delete(listener);
  }

  // ------------------------------------------------------------------ what agents do

  // The bridge's own requests (code mode, the person's commands) are no agent's whereabouts.

  /** `reader` read a cell (or, with null, the notebook's cells). */
  read(reader: Reader, notebook: string, cell: string | null): void {
    if (reader.key !== KERNEL_READER.key) this.touch(reader, notebook, 'reading', cell);
  }

  /** `reader` is writing these cells (its write is planned and about to apply). */
  wrote(reader: Reader, notebook: string, cells: readonly string[]): void {
    if (cells.length && reader.key !== KERNEL_READER.key) this.touch(reader, notebook, 'editing', cells[cells.length - 1]!);
  }

  /** `reader` wrote, by `force`, cells the person is typing in: the person is told (code mode's writes too). */
  overTyping(reader: Reader, notebook: string, cells: readonly PersonTyping[]): void {
    const forced = { notebook, agent: reader.label, cells };
    for (const listener of this.forcedListeners) listener(forced);
  }

  /** `reader` queued these runs: each shows until its ticket ends. */
  ran(reader: Reader, notebook: string, tickets: readonly RunTicket[]): void {
    if (!tickets.length || reader.key === KERNEL_READER.key) return;
    const agent = this.touch(reader, notebook, 'running', tickets[tickets.length - 1]!.cellId, false);
    for (const ticket of tickets) {
      if (ticket.phase === 'ended' || agent.runs.has(ticket.runId)) continue;
      agent.runs.set(ticket.runId, ticket);
      // Announced when it starts and when it ends, not at each output.
      let phase: RunPhase = ticket.phase;
      const step = ticket.onDidChange(() => {
        if (ticket.phase === phase || ticket.phase === 'ended') return; // the end is announced below
        phase = ticket.phase;
        this.changed(notebook);
      });
      void ticket.ended.then(() => {
        step.dispose();
        agent.runs.delete(ticket.runId);
        this.changed(notebook);
      });
    }
    this.changed(notebook);
  }

  /** An agent's scratchpad run started (the activity record's sink): the notebook shows it running code. */
  started(action: AgentAction): void {
    // A call from code in a kernel acts as the run that made it, already shown.
    if (action.kind !== 'execute' || action.transport === 'kernel') return;
    const notebook = this.resolve(action.notebook);
    if (notebook === undefined) return;
    const agent = this.touch(action.reader, notebook, 'running', null, false);
    agent.scratchpads.add(action.id);
    this.changed(notebook);
  }

  ended(action: AgentAction, _end: ActionEnd): void {
    if (action.kind !== 'execute') return;
    for (const [uri, state] of this.notebooks)
      for (const agent of state.agents.values()) if (agent.scratchpads.delete(action.id)) this.changed(uri);
  }

  // ------------------------------------------------------------------ what the person does

  /** The person typed in a cell (a keystroke in its editor, not a write of the bridge's). */
  typed(notebook: string, cell: string): void {
    this.personCell(notebook, cell).typedAt = this.now();
  }

  /** The person's selection in a notebook editor is now these cells. */
  selected(notebook: string, cells: readonly string[]): void {
    const state = this.state(notebook);
    const at = this.now();
    for (const cell of cells) if (!state.selection.has(cell)) this.personCell(notebook, cell).selectedAt = at;
    state.selection = new Set(cells);
  }

  /** Milliseconds since the person typed in the cell, when that is under 10 s; else undefined. */
  personTyping(notebook: string, cell: string): number | undefined {
    const typedAt = this.notebooks.get(notebook)?.person.get(cell)?.typedAt;
    if (typedAt === undefined) return undefined;
    const ms = this.now() - typedAt;
    return ms < PERSON_EDITING_MS ? ms : undefined;
  }

  // ------------------------------------------------------------------ what is seen

  /** What each cell of the notebook shows now: reads and edits for a few seconds, runs while they run. */
  marks(notebook: string): CellMark[] {
    const marks: CellMark[] = [];
    const now = this.now();
    for (const agent of this.live(notebook)) {
      const running = new Set<string>();
      for (const ticket of agent.runs.values()) {
        if (running.has(ticket.cellId)) continue;
        running.add(ticket.cellId);
        const phase = ticket.phase === 'queued' ? 'queued' : 'running';
        marks.push({ cell: ticket.cellId, agent: agent.name, verb: 'running', phase });
      }
      const { verb, cell, at } = agent.last;
      if (cell !== null && verb !== 'running' && !running.has(cell) && now - at < MARK_FADE_MS)
        marks.push({ cell, agent: agent.name, verb });
    }
    return marks;
  }

  /** The agents active in the notebook, most recently active first. */
  agents(notebook: string): PresentAgent[] {
    const now = this.now();
    return this.live(notebook)
      .reverse()
      .map((agent) => {
        const running = [...new Set([...agent.runs.values()].map((t) => t.cellId))];
        const { last } = agent;
        const doing = (verb: AgentVerb, cell: string | null, live: boolean) => ({
          key: agent.key,
          name: agent.name,
          verb,
          cell,
          now: live,
          secondsAgo: seconds(now - last.at),
          running,
        });
        if (last.verb !== 'running' && now - last.at < MARK_FADE_MS) return doing(last.verb, last.cell, true);
        // Its runs go on: they are what it works on (the one it asked for last, if it still runs).
        if (running.length)
          return doing(
            'running',
            last.cell !== null && running.includes(last.cell) ? last.cell : running[running.length - 1]!,
            true,
          );
        if (agent.scratchpads.size) return doing('running', null, true);
        return doing(last.verb, last.cell, false);
      });
  }

  /** When what is shown next changes by itself (a mark fades, an agent goes idle); undefined: nothing is shown. */
  nextExpiry(): number | undefined {
    const now = this.now();
    let next: number | undefined;
    for (const state of this.notebooks.values())
      for (const { last } of state.agents.values())
        for (const at of [last.at + MARK_FADE_MS, last.at + ACTIVE_MS])
          if (at > now && (next === undefined || at < next)) next = at;
    return next;
  }

  /** The answer to an agent that asks who is where in a notebook. */
  answer(
    notebook: { uri: string; sessionId: string; path: string | null },
    cells: readonly { id: string; execution: { status: ExecutionStatus } }[],
    asker: Reader,
  ): PresenceAnswer {
    const now = this.now();
    const indices = new Map(cells.map((c, i) => [c.id, i]));
    const ref = (id: string | null): CellRefView => {
      if (id === null) return null;
      const index = indices.get(id);
      return index === undefined ? null : { id, index };
    };
    const state = this.notebooks.get(notebook.uri);
    const person: PresenceAnswer['person']['cells'][number][] = [];
    for (const [id, p] of state?.person ?? []) {
      const index = indices.get(id);
      const selectedMs = p.selectedAt === undefined ? undefined : now - p.selectedAt;
      const typedMs = p.typedAt === undefined ? undefined : now - p.typedAt;
      const recent = (ms: number | undefined) => ms !== undefined && ms < PERSON_RECENT_MS;
      if (index === undefined || (!recent(selectedMs) && !recent(typedMs))) continue;
      person.push({
        id,
        index,
        selected: state!.selection.has(id),
        ...(recent(selectedMs) && { secondsSinceSelected: seconds(selectedMs!) }),
        ...(recent(typedMs) && { secondsSinceKeystroke: seconds(typedMs!) }),
        editing: typedMs !== undefined && typedMs < PERSON_EDITING_MS,
      });
    }
    person.sort((a, b) => a.index - b.index);
    const running: PresenceAnswer['running'][number][] = [];
    const byAgent = new Set<string>();
    for (const agent of this.live(notebook.uri)) {
      const you = agent.key === asker.key;
      for (const ticket of agent.runs.values()) {
        if (byAgent.has(ticket.cellId)) continue;
        byAgent.add(ticket.cellId);
        const phase = ticket.phase === 'queued' ? 'queued' : 'running';
        running.push({ cell: ref(ticket.cellId), for: agent.name, you, phase });
      }
      for (const _ of agent.scratchpads) running.push({ cell: null, for: agent.name, you, phase: 'running', scratchpad: true });
    }
    cells.forEach((c, index) => {
      const { status } = c.execution;
      if (status !== 'idle' && !byAgent.has(c.id))
        running.push({ cell: { id: c.id, index }, for: null, you: false, phase: status });
    });
    return {
      notebook: { sessionId: notebook.sessionId, path: notebook.path },
      person: { cells: person },
      agents: this.agents(notebook.uri).map((a) => ({
        name: a.name,
        you: a.key === asker.key,
        verb: a.verb,
        cell: ref(a.cell),
        now: a.now,
        secondsAgo: a.secondsAgo,
      })),
      running,
    };
  }

  // ------------------------------------------------------------------ internals

  private state(notebook: string): NotebookState {
    let state = this.notebooks.get(notebook);
    if (!state) this.notebooks.set(notebook, (state = { agents: new Map(), person: new Map(), selection: new Set() }));
    return state;
  }

  private personCell(notebook: string, cell: string): PersonCell {
    const { person } = this.state(notebook);
    const found = person.get(cell) ?? {};
    person.delete(cell); // most recent last
    person.set(cell, found);
    if (person.size > MAX_PERSON_CELLS) person.delete(person.keys().next().value!);
    return found;
  }

  private touch(reader: Reader, notebook: string, verb: AgentVerb, cell: string | null, announce = true): AgentState {
    const { agents } = this.state(notebook);
    const last = { verb, cell, at: this.now() };
    let agent = agents.get(reader.key);
    // A client newly holding a credential is the one its name stood for until then (readerOf's `earlier`).
    const before = agent || reader.earlier === undefined ? undefined : agents.get(reader.earlier);
    if (before) {
      agents.delete(reader.earlier!);
      agent = { ...before, key: reader.key };
    }
    if (agent) {
      agent.name = reader.label;
      agent.last = last;
      agents.delete(reader.key); // most recently active last
    } else agent = { key: reader.key, name: reader.label, last, runs: new Map(), scratchpads: new Set() };
    agents.set(reader.key, agent);
    if (agents.size > MAX_AGENTS) this.forgetIdle(agents);
    if (announce) this.changed(notebook);
    return agent;
  }

  /** The notebook's active agents, least recently active first; the idle ones are forgotten. */
  private live(notebook: string): AgentState[] {
    const state = this.notebooks.get(notebook);
    if (!state) return [];
    this.forgetIdle(state.agents);
    if (!state.agents.size && !state.person.size) this.notebooks.delete(notebook);
    return [...state.agents.values()];
  }

  private forgetIdle(agents: Map<string, AgentState>): void {
    const now = this.now();
    for (const [key, agent] of agents)
      if (!agent.runs.size && !agent.scratchpads.size && now - agent.last.at >= ACTIVE_MS) agents.delete(key);
  }

  private changed(notebook: string): void {
    for (const listener of this.listeners) listener(notebook);
  }
}

/**
 * The 409 for writes to cells the person is typing in: each named with its index and how long ago
 * their last keystroke was. Nothing was changed; `force` writes anyway.
 */
export function personEditingError(cells: readonly { id: string; index: number; ms: number }[], where: string): BridgeError {
  const one = cells.length === 1;
  const named = cells.map((c) => `${c.id} (index ${c.index}, last keystroke ${seconds(c.ms)} s ago)`).join(', ');
  return new BridgeError(
    'conflict',
    `${where}the person is editing ${one ? 'this cell' : 'these cells'} right now: ${one ? 'cell ' : ''}${named}. ` +
      `Nothing was changed: wait until they have not typed in ${one ? 'it' : 'them'} for ${PERSON_EDITING_MS / 1000} s ` +
      `(GET /notebooks/presence says where they are), or pass "force": true to write anyway.`,
    { personEditing: cells.map((c) => ({ id: c.id, index: c.index, secondsSinceKeystroke: seconds(c.ms) })) },
  );
}
