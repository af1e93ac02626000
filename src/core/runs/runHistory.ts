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
import { answersFor, filesOf, type RunFiles, type RunWindow, type WalkSchedule, type WorkspaceSnapshot } from './runFiles';

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
  /** The workspace's files it created or changed, once listed (absent: runs recorded before, or not yet listed). */
  readonly files?: RunFiles;
}

/** A run in a list: all but its code and output. */
export type RunSummary = Omit<AgentRun, 'code' | 'output' | 'owner' | 'files'>;

/** Where the runs are kept between windows (a 0600 JSON file in the extension's storage). */
export interface RunFile {
  load(): AgentRun[];
  save(runs: readonly AgentRun[]): void;
}

/** A run's id: its action's, with its start (action numbers start again in each window). */
export const runIdOf = (action: Pick<AgentAction, 'id' | 'startedAt'>) => `run_${action.startedAt.toString(36)}_${action.id}`;

const sizeOf = (run: AgentRun) =>
  run.code.length + run.output.length + run.detail.length + 500 + (run.files?.files.length ?? 0) * 200;

/** The workspace's walks for the runs' files, and whether the person wants them recorded. */
export interface RunFileWalks {
  readonly schedule: Pick<WalkSchedule, 'soon' | 'now'>;
  readonly on: () => boolean;
}

const NONE: RunFiles = { files: [], complete: true };

export class RunHistory implements ActivitySink {
  private readonly runs: AgentRun[];
  private chars: number;

  /** `walks`: absent, no run's files are listed. */
  constructor(
    private readonly file: RunFile,
    private readonly walks?: RunFileWalks,
  ) {
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
      ...this.filesAtEnd(end),
    };
    this.runs.push(run);
    this.chars += sizeOf(run);
    this.trim();
    this.file.save(this.runs);
    // Worked out by a walk after it, in the background (one walk for a burst of runs).
    if (!run.files)
      this.walks?.schedule.soon(this.unlistedSince()).then(
        (snapshot) => this.settle(snapshot),
        () => undefined,
      );
  }

  /** The files one of the caller's runs created or changed: once listed, as listed; else by a walk made now. */
  async files(caller: Pick<Caller, 'owner'>, id: string): Promise<RunFiles> {
    const run = this.get(caller, id);
    if (run.files) return run.files;
    if (!this.walks) return { files: [], complete: false, reason: 'the files runs change are not recorded here' };
    try {
      this.settle(await this.walks.schedule.now(this.unlistedSince()));
    } catch (error) {
      return { files: [], complete: false, reason: `the workspace could not be walked: ${String(error)}` };
    }
    return this.get(caller, id).files ?? { files: [], complete: false, reason: 'the run was let go meanwhile' };
  }

  /** What a run's record says of its files as it ends: nothing yet (a walk will say), or why none. */
  private filesAtEnd(end: ActionEnd): { files?: RunFiles } {
    if (end.outcome === 'refused') return { files: NONE }; // it ran nothing
    if (!this.walks) return {};
    return this.walks.on() ? {} : { files: { files: [], complete: false, reason: 'agentBridge.runs.recordFiles was off' } };
  }

  /** The earliest start of the runs not yet listed (a walk keeps the files written since). */
  private unlistedSince(): number {
    return Math.min(...this.runs.filter((r) => !r.files).map((r) => windowOf(r).startMs));
  }

  /** Lists the files of every run not yet listed that `snapshot` answers for (it ended before the walk began). */
  private settle(snapshot: WorkspaceSnapshot): void {
    let changed = false;
    const windows = this.runs.map(windowOf);
    this.runs.forEach((run, at) => {
      const window = windows[at]!;
      if (run.files || !answersFor(snapshot, window)) return;
      const listed = {
        ...run,
        files: filesOf(
          snapshot,
          window,
          windows.filter((w) => w !== window),
        ),
      };
      this.chars += sizeOf(listed) - sizeOf(run);
      this.runs[at] = listed;
      changed = true;
    });
    if (changed) this.file.save(this.runs);
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

function windowOf(run: AgentRun): RunWindow {
  const startMs = Date.parse(run.startedAt);
  return { startMs, endMs: startMs + run.durationMs };
}

function summary(run: AgentRun): RunSummary {
  const { code: _c, output: _o, owner: _w, files: _f, ...rest } = run;
  return rest;
}
