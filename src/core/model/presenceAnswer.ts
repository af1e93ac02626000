/** What an agent does in a cell, as presence (agents/presence.ts) shows it. */
export type AgentVerb = 'reading' | 'editing' | 'running';

/** A cell by id and index; null: the notebook as a whole, or a cell no longer there. */
export type CellRefView = { readonly id: string; readonly index: number } | null;

/** `GET /notebooks/presence` and MCP `get_presence`: derived in agents/presence.ts, answered by the cell service. */
export interface PresenceAnswer {
  readonly notebook: { readonly sessionId: string; readonly path: string | null };
  readonly person: {
    /** Cells the person selected or typed into in the last 30 s. */
    readonly cells: readonly {
      readonly id: string;
      readonly index: number;
      /** Selected in their editor now. */
      readonly selected: boolean;
      readonly secondsSinceSelected?: number;
      readonly secondsSinceKeystroke?: number;
      /** They typed in it in the last 10 s: a write to it is refused unless forced. */
      readonly editing: boolean;
    }[];
  };
  /** Agents active in the notebook in the last 30 s, with what each works on. */
  readonly agents: readonly {
    readonly name: string;
    /** The agent asking. */
    readonly you: boolean;
    readonly verb: AgentVerb;
    readonly cell: CellRefView;
    /** It is doing it now; false: that is what it did last, `secondsAgo` before. */
    readonly now: boolean;
    readonly secondsAgo: number;
  }[];
  /** What runs now, and for whom: an agent's name, or null for a run started in the editor. */
  readonly running: readonly {
    readonly cell: CellRefView;
    readonly for: string | null;
    readonly you: boolean;
    readonly phase: 'queued' | 'running';
    readonly scratchpad?: true;
  }[];
}
