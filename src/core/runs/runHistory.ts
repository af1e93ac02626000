/**
 * The run history: every agent run that got as far as its risk scan (scratchpad and cell runs,
 * whatever the transport, those the person refused among them), with its code, status, duration,
 * risk and the head of its output. Kept across reloads in a file (bounded: the newest runs, and a
 * cap on their total size). An agent sees its own runs, keyed on its credential; the person sees
 * all of them in the activity view. No vscode.
 */
import { createHash } from 'node:crypto';
import type { ActionEnd, ActionOutcome, ActivitySink, AgentAction } from '../agents/accessPolicy';
import type { Caller } from '../agents/clients';
import { BridgeError } from '../bridgeError';
import type { RiskReport } from '../model/riskScan';

/** How many runs are kept, and how many characters they hold at most in all (~10 MB). */
export const KEPT_RUNS = 500;
const KEPT_CHARS = 10_000_000;
/** Characters of one run's code kept (its hash is of the whole code). */
const CODE_CHARS = 100_000;

export interface AgentRun {
  readonly id: string;
  /** The client as the person sees it: "agent #3 (says it is claude-code)". */
  readonly client: string;
  /** Whose run it is (Caller.owner: a hash of its credential, salted per window); null: a client with none. */
  readonly owner: string | null;
  readonly transport: AgentAction['transport'];
  /** "scratchpad run", "cell run", "mcp execute_code", ... */
  readonly label: string;
  /** The notebook as the agent named it (session id, path or uri). */
  readonly notebook: string | null;
  readonly code: string;
  /** Characters of code cut from the end (the code was longer than is kept). */
  readonly codeCut?: number;
  /** sha256 of the whole code. */
  readonly codeHash: string;
  readonly status: ActionOutcome;
  readonly durationMs: number;
  /** ISO time it started. */
  readonly startedAt: string;
  /** Why it failed or was refused, in one sentence. */
  readonly detail: string;
  /** The head of what it printed or returned. */
  readonly output: string;
  readonly risk: RiskReport | null;
}

/** A run in a list: all but its code and output. */
export type RunSummary = Omit<AgentRun, 'code' | 'output' | 'owner'>;

/** Where the runs are kept between windows (a 0600 JSON file in the extension's storage). */
export interface RunFile {
  load(): AgentRun[];
  save(runs: readonly AgentRun[]): void;
}

/** A run's id: its action's, with its start (action numbers start again in each window). */
export const runIdOf = (action: Pick<AgentAction, 'id' | 'startedAt'>) => `run_${action.startedAt.toString(36)}_${action.id}`;

const sizeOf = (run: AgentRun) => run.code.length + run.output.length + run.detail.length + 500;

export class RunHistory implements ActivitySink {
  private readonly runs: AgentRun[];
  private chars: number;

  constructor(private readonly file: RunFile) {
    this.runs = file.load().filter((r) => typeof r?.id === 'string' && typeof r.code === 'string');
    this.chars = this.runs.reduce((n, r) => n + sizeOf(r), 0);
    this.trim();
  }

  started(): void {}

  /** Records an action that ran code (or was refused running it). */
  ended(action: AgentAction, end: ActionEnd): void {
    if (end.ran === undefined) return;
    const code = end.ran.slice(0, CODE_CHARS);
    const run: AgentRun = {
      id: runIdOf(action),
      client: action.client,
      owner: action.owner ?? null,
      transport: action.transport,
      label: action.label,
      notebook: action.notebook ?? null,
      code,
      ...(end.ran.length > code.length && { codeCut: end.ran.length - code.length }),
      codeHash: createHash('sha256').update(end.ran).digest('hex'),
      status: end.outcome,
      durationMs: Math.round(end.durationMs),
      startedAt: new Date(action.startedAt).toISOString(),
      detail: end.detail,
      output: end.output,
      risk: end.risk ?? null,
    };
    this.runs.push(run);
    this.chars += sizeOf(run);
    this.trim();
    this.file.save(this.runs);
  }

  /** The caller's runs, newest first, of one notebook if named (a caller without an owner has none). */
  list(caller: Pick<Caller, 'owner'>, options: { notebook?: string | undefined; limit?: number } = {}): RunSummary[] {
    const out: RunSummary[] = [];
    if (caller.owner === undefined) return out;
    for (let i = this.runs.length - 1; i >= 0 && out.length < (options.limit ?? 50); i--) {
      const run = this.runs[i]!;
      if (run.owner !== caller.owner) continue;
      if (options.notebook !== undefined && run.notebook !== options.notebook) continue;
      out.push(summary(run));
    }
    return out;
  }

  /** One of the caller's runs, whole; another's is as unknown as one that never was. */
  get(caller: Pick<Caller, 'owner'>, id: string): AgentRun {
    const run = caller.owner === undefined ? undefined : this.runs.find((r) => r.id === id && r.owner === caller.owner);
    if (!run) throw new BridgeError('not_found', `No run ${id} of yours is kept (GET /notebooks/runs lists them)`);
    return run;
  }

  /** Every run kept, newest first (the person's view). */
  all(): readonly AgentRun[] {
    return [...this.runs].reverse();
  }

  private trim(): void {
    while (this.runs.length > KEPT_RUNS || (this.chars > KEPT_CHARS && this.runs.length > 1))
      this.chars -= sizeOf(this.runs.shift()!);
  }
}

function summary(run: AgentRun): RunSummary {
  const { code: _c, output: _o, owner: _w, ...rest } = run;
  return rest;
}
