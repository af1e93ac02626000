/**
 * The person's say over agents: one access policy every agent action passes, and one activity
 * record it lands in. Transports (the HTTP route table, the MCP tools) call `Gate.enter` from a
 * single wrapper each; the VS Code side (src/access) supplies the mode, the prompt and the sinks
 * (view, cell marks, audit log). No vscode, no HTTP types here.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ClientRegistry, readerOf, type Caller } from './clients';
import { BridgeError } from '../bridgeError';
import { recordOutcome, type ActionOutcome, type OutcomeKind } from '../outcome';
import { jsonHead } from '../text/jsonHead';
import type { Reader } from '../model/versions';
import {
  asksPerson,
  describeFinding,
  findingKey,
  joinCode,
  KindGrants,
  kindOf,
  mergeReports,
  riskReport,
  type RiskFinding,
  type RiskReport,
  type RunCode,
} from '../model/riskScan';

/** `ask-risky`: as `full`, but a run the risk scan flags critical or high waits for the person. */
export type AccessMode = 'full' | 'ask-risky' | 'ask' | 'read-only' | 'off';
export const ACCESS_MODES: readonly AccessMode[] = ['full', 'ask-risky', 'ask', 'read-only', 'off'];

/**
 * What a route row or MCP tool does, as the policy sees it. `open` is never refused (/health);
 * `gateway` is a transport carrying its own checked actions (the MCP endpoint): only `off`
 * refuses it. Reads pass every mode but `off`; edits, saves (writing a notebook to its file),
 * scratchpad executes and cell runs are the actions the person steers.
 */
export type AccessKind = 'open' | 'gateway' | 'read' | 'edit' | 'save' | 'execute' | 'run';

export type { ActionOutcome };

/** What a transport knows of an action before it runs; who asked is its `Caller` (clients.ts). */
export interface ActionRequest extends Caller {
  /** `kernel`: code running in a kernel called the bridge (code mode). */
  readonly transport: 'http' | 'mcp' | 'kernel';
  /**
   * Hands a credential the bridge minted to a caller that had none (an HTTP response header), so
   * that its changes and grants bind to it; absent where the transport has no way to.
   */
  readonly issue?: (credential: string) => void;
  /** Aborted when the client goes away (its connection closed): a prompt still open is withdrawn. */
  readonly left?: AbortSignal;
  readonly kind: AccessKind;
  /** Other kinds the action includes (a batch that also runs cells): ruled on as each, the strictest wins. */
  readonly also?: readonly AccessKind[];
  /** What the activity view calls it: "scratchpad run", "cell edit", "mcp edit_cells", ... */
  readonly label: string;
  /** The notebook as the agent named it (session id, path or uri); undefined: the only open one. */
  readonly notebook: string | undefined;
  /** The code to run, or the change (JSON) for edits. */
  readonly code: string;
}

export interface AgentAction extends ActionRequest {
  readonly id: number;
  /** Its credential was minted for it: the client sent none (so it owns no earlier change). */
  readonly minted?: true;
  /**
   * Who the request is to the cell service and presence: its client as the request came
   * (`readerOf`), never a credential minted for it now, which its other requests may not carry.
   */
  readonly reader: Reader;
  /** Epoch milliseconds. */
  readonly startedAt: number;
  /** One line for lists. */
  readonly summary: string;
}

export interface ActionEnd {
  readonly outcome: ActionOutcome;
  readonly durationMs: number;
  /** Why it failed or was refused, or what it answered, in one sentence. */
  readonly detail: string;
  /** The head of what it printed or returned. */
  readonly output: string;
  /** What the risk scan found in the code it ran (absent: it ran none, or nothing was found). */
  readonly risk?: RiskReport;
  /** The code it ran (or was refused running), as the risk scan read it: a scratchpad's, or each cell's under a `# cell` line. */
  readonly ran?: string;
}

/** The person's answer to an `ask`; `withdrawn`: the client left before they answered. */
export type Answer = 'allow' | 'allow-10-minutes' | 'deny' | 'no-answer' | 'withdrawn';

/** A run the risk scan flagged, as the person is asked about it: the findings and the code they are in. */
export interface RiskQuestion {
  readonly report: RiskReport;
  readonly code: string;
}

/** The person's side of the policy: the current mode, a way to ask, and the cap on agent runs. */
export interface Person {
  mode(): AccessMode;
  /**
   * Asks about `action` (with `risk`: about a run the scan flagged, where "for 10 minutes" allows
   * the findings' kinds); once `left` aborts, the prompt is withdrawn and the answer is `withdrawn`.
   */
  ask(action: AgentAction, left?: AbortSignal, risk?: RiskQuestion): Promise<Answer>;
  /** Longest an agent's run may take before it is interrupted as timed out; 0: no cap. */
  maxRunMs(): number;
}

/** Where actions land: the activity view, cell marks and the audit log each implement this. */
export interface ActivitySink {
  started(action: AgentAction): void;
  ended(action: AgentAction, end: ActionEnd): void;
}

export const GRANT_MS = 10 * 60_000;
const OUTPUT_HEAD_CHARS = 2_000;
const SUMMARY_CHARS = 100;

export type Ruling = 'allow' | 'ask' | { refuse: string };

/** The pure rule: what a mode does with a kind of action (`ask-risky` rules on runs by their scan, Gate.vetRisk). */
export function rule(mode: AccessMode, kind: AccessKind): Ruling {
  if (kind === 'open' || mode === 'full' || mode === 'ask-risky') return 'allow';
  if (mode === 'off') {
    return {
      refuse:
        'The person turned agent access off in VS Code (Agent Bridge access mode "off"): only /health answers. ' +
        'Ask them to choose another mode ("Agent Bridge: Set Access Mode").',
    };
  }
  if (kind === 'read' || kind === 'gateway') return 'allow';
  if (mode === 'read-only') {
    return {
      refuse:
        `The person chose read-only access for agents in VS Code: reading sessions, cells and outputs is allowed, ` +
        `but this ${kind} is refused. Ask them to switch the access mode to "ask" or "full" ("Agent Bridge: Set Access Mode").`,
    };
  }
  return 'ask';
}

/** A batch's `run` list that names cells: the batch is a run too. */
export const alsoRuns = (run: unknown) => Array.isArray(run) && run.length > 0;

/** The ruling of an action of several kinds: a refusal over an ask over an allow. */
function strictest(rulings: readonly Ruling[]): Ruling {
  return rulings.find((r) => typeof r === 'object') ?? (rulings.includes('ask') ? 'ask' : 'allow');
}

const REFUSED_RISKY: Record<'deny' | 'no-answer' | 'withdrawn', string> = {
  withdrawn: 'The client left before the person answered, so nothing was run.',
  deny: 'The person denied this run in VS Code (access mode "ask-risky"); nothing was run.',
  'no-answer': 'The person did not answer in time (access mode "ask-risky"), so nothing was run; try again when they are there.',
};

/** What `mode` does with an action of `kind` that also includes `also`. */
export function ruleOn(mode: AccessMode, kind: AccessKind, also: readonly AccessKind[] = []): Ruling {
  return strictest([kind, ...also].map((k) => rule(mode, k)));
}

const REFUSED_BY_ANSWER: Record<'deny' | 'no-answer' | 'withdrawn', string> = {
  withdrawn: 'The client left before the person answered, so the request was withdrawn and nothing was started.',
  deny: 'The person denied this action in VS Code (access mode "ask").',
  'no-answer': 'The person did not answer in time (access mode "ask"), so the action was refused; try again when they are there.',
};

/**
 * What an action runs or changes, from the inputs a transport got (the notebook's name left
 * out): its code, else the change as JSON, else nothing (a bare interrupt has no inputs, and
 * its summary is then its label rather than "{}").
 */
export function actionCode(code: unknown, rest: Record<string, unknown>): string {
  if (typeof code === 'string') return code;
  return Object.keys(rest).length ? JSON.stringify(rest) : '';
}

/**
 * One line naming an action: its first line that is neither blank nor a comment (code that opens
 * with a comment would otherwise show only the comment), cut, and how many lines it has.
 */
export function summarize(label: string, code: string): string {
  const lines = code.split('\n').filter((l) => l.trim());
  if (!lines.length) return label;
  const first = (lines.find((l) => !/^\s*(#|\/\/)/.test(l)) ?? lines[0]!).trim();
  const cut = first.length > SUMMARY_CHARS ? `${first.slice(0, SUMMARY_CHARS - 1)}…` : first;
  return lines.length > 1 ? `${cut} (${lines.length} lines)` : cut;
}

/** The action whose work is running (what `Activity.within` runs), across awaits. */
const acting = new AsyncLocalStorage<Activity>();

/**
 * An action under way: ends once, with the outcome a transport settled on or the one its
 * handler's result implies. Stopped by "Stop Agents".
 */
export class Activity {
  private settled: { kind: OutcomeKind; detail: string } | undefined;
  private output = '';
  private over = false;
  private risk: RiskReport | undefined;
  /** The code it ran, by cell ('' for a scratchpad's): a series checks its cells again one by one. */
  private readonly ran = new Map<string, string>();
  /** Findings the person allowed for this action: the same code checked again is not asked about twice. */
  private readonly allowed = new Set<string>();
  // Plain listeners, not an AbortController: a controller, its signal and a listener are paid
  // on every run (SETUP.md, measured figures), and almost no action is ever stopped.
  private stopped = false;
  private readonly onStopped = new Set<() => void>();

  /** The action whose work calls this (undefined: none, e.g. the person's own click). */
  static current(): Activity | undefined {
    return acting.getStore();
  }

  constructor(
    readonly action: AgentAction,
    private readonly finish: (activity: Activity, end: ActionEnd) => void,
    private readonly now: () => number,
  ) {}

  /** Runs `work` as this action: what it starts (a kernel run, the calls that run makes) knows whose it is. */
  within<T>(work: () => T): T {
    return acting.run(this, work);
  }

  /** Adds code this action runs, and what the risk scan found in it, to its record. */
  flag(report: RiskReport, pieces: readonly RunCode[]): void {
    for (const p of pieces) this.ran.set(p.cell ?? '', p.code);
    if (report.findings.length) this.risk = this.risk ? mergeReports([this.risk, report]) : report;
  }

  /** Whether the person allowed this finding for this action already. */
  allows(finding: RiskFinding): boolean {
    return this.allowed.has(findingKey(finding));
  }

  allow(findings: readonly RiskFinding[]): void {
    for (const f of findings) this.allowed.add(findingKey(f));
  }

  /** `stopped`: by the person ("Stop Agents", or a mode that ends agents' runs); `ended`: it has answered. */
  get state(): 'running' | 'stopped' | 'ended' {
    return this.over ? 'ended' : this.stopped ? 'stopped' : 'running';
  }

  /** Calls `listener` when the person stops every agent run (at once if they already did); returns its removal. */
  onStop(listener: () => void): () => void {
    if (this.stopped) listener();
    else this.onStopped.add(listener);
    return () => this.onStopped.delete(listener);
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const listener of this.onStopped) listener();
    this.onStopped.clear();
  }

  /** The outcome, when the transport knows it better than the handler's result (a stream's `done`). */
  settle(kind: OutcomeKind, detail = ''): void {
    this.settled ??= { kind, detail };
  }

  /** Keeps the head of what the action printed; the rest is only counted by the kernel. */
  note(text: string): void {
    if (this.output.length < OUTPUT_HEAD_CHARS) this.output += text.slice(0, OUTPUT_HEAD_CHARS - this.output.length);
  }

  /** Keeps the head of an answer as JSON, written only as far as the head goes (an answer can be megabytes). */
  noteJson(value: unknown): void {
    if (this.output.length < OUTPUT_HEAD_CHARS) this.note(jsonHead(value, OUTPUT_HEAD_CHARS - this.output.length));
  }

  /** Ends the action as `kind` (unless a run settled it first); its record says what the kind means there. */
  end(kind: OutcomeKind, detail = ''): void {
    if (this.over) return;
    this.over = true;
    const settled = this.settled && kind !== 'refused' ? this.settled : { kind, detail };
    const outcome = recordOutcome(settled.kind);
    this.finish(this, {
      outcome: this.stopped && outcome !== 'timed_out' ? 'interrupted' : outcome,
      durationMs: this.now() - this.action.startedAt,
      detail: settled.detail,
      output: this.output,
      ...(this.risk && { risk: this.risk }),
      ...(this.ran.size && { ran: joinCode([...this.ran].map(([cell, code]) => (cell ? { cell, code } : { code }))) }),
    });
  }
}

/**
 * The policy and the record in one door: `enter` rules on an action (asking the person when the
 * mode says so), records it, and hands back its Activity; refusals throw a 403 and are recorded
 * too. Reads are let through without a record (agents poll), but their client is remembered.
 */
export class Gate {
  private nextId = 1;
  /** "Allow this kind for 10 minutes" of the `ask-risky` prompt, per credential and kind of finding. */
  private readonly kindGrants = new KindGrants();
  private readonly running = new Set<Activity>();
  /** Client → when it was last seen. */
  readonly clients = new Map<string, number>();

  constructor(
    private readonly person: Person,
    private readonly sinks: readonly ActivitySink[],
    /** The credentials minted so far, whom they went to and their grants; one per window. */
    readonly identities: ClientRegistry,
    private readonly now: () => number = Date.now,
  ) {}

  /** A gate that allows everything and records nowhere (unit tests of the transports). */
  static open(): Gate {
    return new Gate({ mode: () => 'full', ask: () => Promise.resolve('allow'), maxRunMs: () => 0 }, [], new ClientRegistry());
  }

  get mode(): AccessMode {
    return this.person.mode();
  }

  get maxRunMs(): number {
    return this.person.maxRunMs();
  }

  /** Null for kinds that are not recorded (open, gateway, read). Throws BridgeError 403 when refused. */
  async enter(request: ActionRequest): Promise<Activity | null> {
    const at = this.now();
    if (request.kind !== 'open') this.clients.set(request.client, at);
    const ruling = ruleOn(this.person.mode(), request.kind, request.also);
    const recorded = request.kind !== 'open' && request.kind !== 'gateway' && request.kind !== 'read';
    if (ruling === 'allow' && !recorded) return null;
    if (typeof ruling === 'object' && !recorded) throw new BridgeError('refused', ruling.refuse);

    // A writing client that sent no credential gets one now: what it changes, and a grant, bind to it.
    // (A kernel's call acts as the run that made it: it never gets one.)
    const via =
      typeof ruling !== 'object' && request.credential === undefined && request.transport !== 'kernel'
        ? request.transport
        : undefined;
    const issue = via && request.issue;
    let caller: Caller = request;
    if (via && issue) {
      caller = this.identities.identify(this.identities.mint(request.claim, via), request.claim);
      issue(caller.credential!);
    }
    const activity = this.begin({ ...request, ...caller, ...(issue && { minted: true as const }) }, at, readerOf(request));
    const { action } = activity;
    let refusal = typeof ruling === 'object' ? ruling.refuse : ruling === 'ask' ? await this.ask(action) : null;
    // An approval that lands after the client left starts nothing.
    if (!refusal && request.left?.aborted) refusal = REFUSED_BY_ANSWER.withdrawn;
    if (refusal) {
      activity.end('refused', refusal);
      throw new BridgeError('refused', refusal);
    }
    return activity;
  }

  /**
   * Rules on a run by what its risk scan found, just before it starts: the findings join the
   * action's record, and in the `ask-risky` mode critical and high ones wait for the person
   * (unless they allowed that kind for this client within 10 minutes, or these findings for this
   * action). Throws a 403 naming the findings when the person does not allow them.
   */
  async vetRisk(activity: Activity | undefined, report: RiskReport, pieces: readonly RunCode[]): Promise<void> {
    if (!activity) return;
    activity.flag(report, pieces);
    if (this.person.mode() !== 'ask-risky') return;
    const { action } = activity;
    const at = this.now();
    const asking = report.findings.filter(
      (f) => asksPerson(f) && !activity.allows(f) && !this.kindGrants.allows(action.credential, kindOf(f), at),
    );
    if (!asking.length) return;
    const flagged = riskReport(asking);
    const answer = action.left?.aborted
      ? 'withdrawn'
      : await this.person.ask(action, action.left, { report: flagged, code: joinCode(pieces) });
    // As the `ask` grants: bound to what only its client holds (a caller without a credential gets none).
    if (answer === 'allow-10-minutes' && action.credential !== undefined)
      this.kindGrants.grant(action.credential, asking.map(kindOf), this.now() + GRANT_MS);
    if (answer === 'allow' || answer === 'allow-10-minutes') return activity.allow(asking);
    const why = asking.slice(0, 3).map(describeFinding).join('; ');
    throw new BridgeError('refused', `${REFUSED_RISKY[answer]} The risk scan flagged ${why}.`, { risk: flagged });
  }

  /**
   * Records `request` as refused for `detail` and throws its 403: an action ruled on outside
   * `enter` (a call from code in a kernel, refused for what the run that made it is).
   */
  refuse(request: ActionRequest, detail: string): never {
    this.begin(request, this.now()).end('refused', detail);
    throw new BridgeError('refused', detail);
  }

  /** An action recorded as started; `reader`: its client as the request came (before any credential minted for it). */
  private begin(request: ActionRequest & { readonly minted?: true }, at: number, reader = readerOf(request)): Activity {
    const action: AgentAction = {
      ...request,
      reader,
      id: this.nextId++,
      startedAt: at,
      summary: summarize(request.label, request.code),
    };
    const activity = new Activity(action, (a, end) => this.finished(a, end), this.now);
    this.running.add(activity);
    for (const sink of this.sinks) sink.started(action);
    return activity;
  }

  /** Interrupts every action under way (their transports hear it through `onStop`); returns them. */
  stopAll(): AgentAction[] {
    const stopped = [...this.running];
    for (const activity of stopped) activity.stop();
    return stopped.map((a) => a.action);
  }

  private async ask(action: AgentAction): Promise<string | null> {
    const { credential } = action;
    if (credential !== undefined && this.identities.granted(credential)) return null;
    if (action.left?.aborted) return REFUSED_BY_ANSWER.withdrawn;
    const answer = await this.person.ask(action, action.left);
    // A grant binds to what only its client holds (a caller without a credential gets none).
    if (answer === 'allow-10-minutes' && credential !== undefined) this.identities.grant(credential, this.now() + GRANT_MS);
    if (answer === 'allow' || answer === 'allow-10-minutes') return null;
    return REFUSED_BY_ANSWER[answer];
  }

  private finished(activity: Activity, end: ActionEnd): void {
    this.running.delete(activity);
    for (const sink of this.sinks) sink.ended(activity.action, end);
  }
}
