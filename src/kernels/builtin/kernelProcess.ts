/**
 * Driver of the builtin Python kernel (kernel.py), one process per notebook: the run scheduler
 * over one KernelChild (kernelChild.ts) at a time, speaking kernelWire.ts. No `vscode` import:
 * the extension and plain unit tests both use it.
 *
 * Cell runs are counted per kernel process, as Jupyter's kernels count them: the count is the
 * cell's `In[n]`, given to `onStart` and in the result, and tracebacks name the cell's code
 * `Cell In[n]` (IPython's own name for it), a name the editor, the saved file and the bridge's
 * answers all show. Where the kernel's Python has IPython (KernelInfo.ipython, its version), runs
 * go through IPython's InteractiveShell, which counts and names cells itself: a cell's value
 * arrives as a display with `executionCount` (Jupyter's execute_result, in output order: before
 * the figures shown after the cell) and the cell's result carries IPython's count; `value` is then
 * only a scratchpad run's value. Without IPython a cell's value is `value` and the count is ours,
 * sent with the run. AGENT_BRIDGE_IPYTHON=0 in the environment keeps the kernel plain Python.
 *
 * Python reaches `call` through `import _agent_bridge_host; _agent_bridge_host.call(method, params)`.
 * The handler learns which run made the call, and for whom that run was queued (`owner`, read
 * when it was), only while the run is in flight: a call from a thread or subprocess of a run that
 * ended comes with no run, for the handler to refuse. Runs are re-entrant: while the innermost run is blocked in a call, the next queued run is sent
 * at once and the kernel runs it nested, on its main thread, while the caller waits (a call may
 * be answered by running cells, which would otherwise queue behind their caller forever). Each
 * run keeps its own id, so output is routed per run, and output of no active run (a thread or a
 * subprocess of a run that ended) goes to no run: it is counted in `strayOutput`. Interrupting
 * sends a request naming the run, then SIGINT (to the kernel's process group), for the innermost
 * running code; a run still going once the kernel was given INTERRUPT_GRACE_MS (timeGiven.ts)
 * costs a kernel restart.
 */
import type { InterruptHow, KernelStatus, MimeBundle, StreamName } from '../../core/model/kernelPort';
import type { RunOutcome } from '../../core/outcome';
import { KernelChild, type KernelChildEvents, type KernelChildOptions, type KernelInfo } from './kernelChild';
import {
  MAX_FRAME_BYTES,
  type CellName,
  type DisplayMetadata,
  type KernelMessage,
  type OversizeFrame,
  type RunMode,
} from './kernelWire';
import { StrayOutputRecord, type StrayOutput } from './strayOutput';
import { TimeGiven } from './timeGiven';
import { errorMessage } from '../../core/errorMessage';
import { BridgeError } from '../../core/bridgeError';
import type { RunDataflow } from '../../core/model/cellGraph';

export type { KernelInfo } from './kernelChild';
export type { CellName, DisplayMetadata, RunMode } from './kernelWire';
export type { StrayOutput } from './strayOutput';

export type KernelOutput =
  | { kind: 'stream'; name: StreamName; text: string }
  /** `executionCount`: the cell's value (Jupyter's execute_result), else display_data. */
  | { kind: 'display'; data: MimeBundle; metadata?: DisplayMetadata; executionCount?: number }
  | { kind: 'error'; name: string; message: string; traceback: string };

/**
 * How one kernel run ended. `restarted`: stopping it (or a restart) killed the kernel, whose state
 * is lost. `executionCount`: the cell's execution count, where the kernel keeps one (IPython).
 */
export interface KernelRunResult {
  success: boolean;
  status: RunOutcome;
  value: MimeBundle | null;
  restarted?: true;
  executionCount?: number;
  /** What a cell run read and changed, as the kernel recorded it (absent where it could not). */
  dataflow?: RunDataflow;
}

export interface KernelExitInfo {
  code: number | null;
  signal: string | null;
  /** true when dispose() or restart() killed it. */
  expected: boolean;
}

/** The run that made a call, while it is in flight. */
export interface CallingRun {
  readonly mode: RunMode;
  /** Whom it runs for, as `KernelProcessOptions.owner` said when it was queued. */
  readonly owner: unknown;
}

/** What a call handler knows of the run that called. */
export interface CallContext {
  /**
   * The calling run; undefined when the call comes from no run in flight (a thread or subprocess
   * an ended run left behind, or code running between runs).
   */
  readonly run: CallingRun | undefined;
  /** Output into the calling run, as if it had printed it; dropped once that run ended. */
  emit(output: KernelOutput): void;
  /** Aborted when the calling run is aborted (its client went away; the reply then interrupts it) or ends. */
  readonly signal: AbortSignal;
}

/**
 * Answers `_agent_bridge_host.call()`; a rejection becomes HostCallError in Python (CallRefused
 * for a BridgeError of kind `refused`).
 */
export type CallHandler = (method: string, params: unknown, ctx: CallContext) => Promise<unknown>;

export interface KernelProcessOptions extends KernelChildOptions {
  onCall?: CallHandler;
  /** Whom a run is for, read when it is queued (the agent action in whose request it was): its calls' `run.owner`. */
  owner?: () => unknown;
  /** Fires when a kernel that was ready exits (start failures reject start() instead). */
  onExit?: (info: KernelExitInfo) => void;
}

/** Error output names the driver itself produces. */
export const KERNEL_DIED = 'KernelDied';
export const KERNEL_RESTARTED = 'KernelRestarted';
export const KERNEL_DISPOSED = 'KernelDisposed';
export const KERNEL_START_FAILED = 'KernelStartFailed';
export const KERNEL_OUTPUT_TOO_LARGE = 'KernelOutputTooLarge';

/** kernel_inspect.py answers within 4 s (ANSWER_SECONDS); past this the kernel is not reading. */
const INSPECT_TIMEOUT_MS = 10_000;

/** How long a run may take to stop after SIGINT before the kernel is restarted. */
export const INTERRUPT_GRACE_MS = 2000;
/** Interrupts of the same innermost run this close together send one SIGINT: a second one could
 * reach the run it is nested in, once the first has ended the inner one. */
const SIGINT_COALESCE_MS = 250;
/** How often a stopping run's grace is measured. */
const GRACE_POLL_MS = 100;
const RESTARTED_MESSAGE = 'The kernel was restarted before the run completed; its state (variables, imports) is lost.';
const RESTARTED_QUEUED_MESSAGE = 'The kernel was restarted before this run started; its state (variables, imports) is lost.';

interface Job {
  readonly id: number;
  readonly code: string;
  readonly mode: RunMode;
  readonly owner: unknown;
  readonly cell: CellName | undefined;
  /** A cell run's execution count, once it is sent (IPython's own, when it reports it at the end). */
  count: number | undefined;
  readonly onOutput: (o: KernelOutput) => void;
  readonly resolve: (r: KernelRunResult) => void;
  readonly signal: AbortSignal | undefined;
  readonly onStart: ((executionCount: number | undefined) => void) | undefined;
  onAbort: (() => void) | undefined;
  aborted: boolean;
  /** An interrupt was sent for it (so a failure is reported as `interrupted`). */
  interrupted: boolean;
  /** The host dropped a message of it (too large): it ends failed. */
  hostFailed: boolean;
  /** stop() in progress: what it took, once the run ended. */
  stopping: Promise<InterruptHow> | undefined;
  onEnd: (() => void) | undefined;
  /** Host calls of this run not answered yet: while > 0 the run waits, and runs may nest in it. */
  openCalls: number;
  /** Aborts the calls' handlers when the run is aborted (made on the first call). */
  calls: AbortController | undefined;
}

export class KernelProcess implements KernelChildEvents {
  private proc: KernelChild | null = null;
  /** Runs sent to the kernel and not done, outermost first: each later one nests in the one before. */
  private readonly active: Job[] = [];
  private readonly queue: Job[] = [];
  private nextId = 0;
  private disposed: 'disposed' | 'restarted' | undefined;
  private restartCount = 0;
  private lastSigint: { job: Job; at: number } | undefined;
  private readonly stray: StrayOutputRecord;
  private nextQid = 0;
  /** Inspect requests sent and not answered: settled by their answer, a timeout, or the process's end. */
  private readonly inspects = new Map<number, { settle: (answer: unknown, error?: Error) => void }>();
  /** Why the kernel's state was thrown away since the last run started, to tell the next run. */
  private lost: string | undefined;
  /** When the current process was spawned (undefined: none has been yet). */
  private spawnedAt: number | undefined;
  /** The current process's last cell execution count (IPython's once it reported one). */
  private cellCount = 0;

  constructor(private readonly opts: KernelProcessOptions) {
    this.stray = new StrayOutputRecord(opts.log);
  }

  /** Process alive (spawned and not yet exited). */
  get running(): boolean {
    return this.proc !== null && this.proc.alive;
  }

  /** Where the kernel is: a run sent or queued makes it busy; one that exited is dead until the next run starts another. */
  get status(): KernelStatus {
    const p = this.proc;
    if (this.disposed || (!p && this.spawnedAt !== undefined) || (p && !p.alive)) return { state: 'dead' };
    if (!p) return { state: 'not_started' };
    const startedAt = this.spawnedAt;
    if (!p.info) return { state: 'starting', startedAt };
    return { state: this.active.length || this.queue.length ? 'busy' : 'idle', startedAt };
  }

  /** pid and Python version once the kernel is ready. */
  get info(): KernelInfo | null {
    return this.proc?.info ?? null;
  }

  /**
   * Output that belonged to no active run (threads and subprocesses of runs that ended, output
   * while idle): never given to another run, counted here, its end kept, and logged.
   */
  get strayOutput(): StrayOutput {
    return this.stray.snapshot;
  }

  /** How many times restart(), an interrupt that escalated, or dispose('restarted') threw the kernel's state away. */
  get restarts(): number {
    return this.restartCount;
  }

  /** Whether a run queued or in flight is for an owner `of` takes (`KernelProcessOptions.owner`). */
  runsFor(of: (owner: unknown) => boolean): boolean {
    return [...this.active, ...this.queue].some((job) => of(job.owner));
  }

  /** Resolves on `ready`; rejects with the reason (and stderr tail) if the kernel cannot start. */
  start(): Promise<void> {
    if (this.disposed) return Promise.reject(new Error('The kernel was disposed.'));
    return this.ensureProc().ready;
  }

  /**
   * Queues a run; resolves when it is done (never rejects). `onStart` fires when the run is sent
   * to the kernel: its turn came (not for runs dropped or failed before that), with a cell run's
   * execution count (IPython's may still differ: the result's is the one). `cell` names the
   * notebook cell a cell run comes from, in messages about it.
   */
  run(
    code: string,
    mode: RunMode,
    onOutput: (o: KernelOutput) => void,
    signal?: AbortSignal,
    onStart?: (executionCount: number | undefined) => void,
    cell?: CellName,
  ): Promise<KernelRunResult> {
    return new Promise<KernelRunResult>((resolve) => {
      if (signal?.aborted) return resolve({ success: false, status: 'interrupted', value: null });
      const job: Job = {
        id: ++this.nextId,
        code,
        mode,
        owner: this.opts.owner?.(),
        cell,
        count: undefined,
        onOutput,
        resolve,
        signal,
        onStart,
        onAbort: undefined,
        aborted: false,
        interrupted: false,
        hostFailed: false,
        stopping: undefined,
        onEnd: undefined,
        openCalls: 0,
        calls: undefined,
      };
      if (this.disposed === 'restarted') return this.fail(job, KERNEL_RESTARTED, RESTARTED_QUEUED_MESSAGE, true);
      if (this.disposed) return this.fail(job, KERNEL_DISPOSED, 'The kernel was disposed.');
      if (signal) {
        job.onAbort = () => this.abort(job);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      const ahead = this.waitsFor();
      if (ahead && mode === 'scratchpad') {
        // Told at once, so a run that queues does not look hung.
        emit(
          job,
          { kind: 'stream', name: 'stderr', text: `Waiting for ${ahead} to finish before this run starts.\n` },
          this.opts.log,
        );
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** What a run queued now would wait for, in words; undefined when it would start at once. */
  private waitsFor(): string | undefined {
    const inner = this.active[this.active.length - 1];
    const busy = (inner && inner.openCalls === 0) || this.queue.length > 0;
    if (!busy) return undefined;
    const running = inner
      ? inner.cell
        ? `the run of cell ${inner.cell.id}${inner.count === undefined ? '' : ` (In[${inner.count}])`}`
        : 'a scratchpad run'
      : 'the kernel to start';
    const queued = this.queue.length ? ` and ${this.queue.length} queued run(s)` : '';
    return `${running}${queued}`;
  }

  /**
   * Asks the running kernel a kernel_inspect.py query (variables, one variable, the cells'
   * analysis). Answered beside the runs, even while one executes: no run, no execution count,
   * no history. Rejects when no kernel process is ready, or it does not answer in time.
   */
  inspect(query: unknown): Promise<unknown> {
    const p = this.proc;
    if (!p?.alive || !p.info)
      return Promise.reject(
        new Error('the kernel is not running (it starts with the first cell run; until then it has no variables)'),
      );
    const qid = ++this.nextQid;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(
        () => settle(undefined, new Error(`The kernel did not answer within ${INSPECT_TIMEOUT_MS / 1000} s.`)),
        INSPECT_TIMEOUT_MS,
      );
      const settle = (answer: unknown, error?: Error) => {
        clearTimeout(timer);
        this.inspects.delete(qid);
        if (error) reject(error);
        else resolve(answer);
      };
      this.inspects.set(qid, { settle });
      p.send({ op: 'inspect', qid, query });
    });
  }

  /**
   * Stops the innermost run: SIGINT to the kernel (and its subprocesses), and if the run has not
   * ended once the kernel was given INTERRUPT_GRACE_MS, a kernel restart. Resolves with what it took once the run
   * ended, or null when no run was in progress.
   */
  interrupt(): Promise<InterruptHow | null> {
    const inner = this.active[this.active.length - 1];
    if (!inner || !this.proc?.alive) return Promise.resolve(null);
    return this.stop(inner);
  }

  /** Kills the process: its runs and queued runs fail with KernelRestarted; the next run starts a fresh one. */
  async restart(): Promise<void> {
    if (this.disposed) throw new Error('The kernel was disposed.');
    this.restartCount++;
    this.lost = 'the kernel was restarted';
    this.killProc();
    this.failAll(KERNEL_RESTARTED, RESTARTED_MESSAGE, true);
    await this.start();
  }

  /** `restarted`: the owner replaces it by a fresh kernel, so pending runs are told the kernel restarted. */
  dispose(reason: 'disposed' | 'restarted' = 'disposed'): void {
    if (this.disposed) return;
    this.disposed = reason;
    if (reason === 'restarted') this.restartCount++;
    this.killProc();
    if (reason === 'restarted') this.failAll(KERNEL_RESTARTED, RESTARTED_MESSAGE, true);
    else this.failAll(KERNEL_DISPOSED, 'The kernel was disposed before the run completed.');
  }

  // ---- internals ----

  private ensureProc(): KernelChild {
    // A process that exited but whose pipes are still draining is replaced, unless its
    // in-flight run is waiting to be failed by onDead.
    if (this.proc && (this.proc.alive || this.active.length)) return this.proc;
    const p = new KernelChild(this.opts, this);
    this.proc = p;
    this.spawnedAt = Date.now();
    this.cellCount = 0;
    p.ready.then(
      () => {
        if (this.proc === p) this.pump();
      },
      (err: unknown) => {
        if (this.proc !== p) return;
        this.proc = null;
        this.failAll(KERNEL_START_FAILED, errorMessage(err));
      },
    );
    return p;
  }

  /** Sends the next queued run when the kernel is idle, or nested when the innermost run waits on a call. */
  private pump(): void {
    if (this.queue.length === 0 || this.disposed) return;
    const inner = this.active[this.active.length - 1];
    if (inner && inner.openCalls === 0) return;
    const p = this.ensureProc();
    if (!p.info) return; // pumped again on ready
    const job = this.queue.shift() as Job;
    if (!inner) p.stderrTail = '';
    this.active.push(job);
    if (!inner && this.lost) {
      emit(job, { kind: 'stream', name: 'stderr', text: `${lostStateNote(this.lost)}\n` }, this.opts.log);
      this.lost = undefined;
    }
    // IPython counts its cells (not an empty one) and names them itself; plain Python is told.
    const ipython = p.info.ipython !== null;
    if (job.mode === 'cell') job.count = ipython ? this.cellCount + 1 : ++this.cellCount;
    const counted = job.mode === 'cell' && !ipython ? { cell: { count: job.count! } } : {};
    p.send({ op: 'execute', id: job.id, code: job.code, mode: job.mode, ...counted });
    try {
      job.onStart?.(job.count);
    } catch (err) {
      this.opts.log?.(`kernel onStart handler threw: ${errorMessage(err)}`);
    }
  }

  private abort(job: Job): void {
    job.aborted = true;
    const i = this.queue.indexOf(job);
    if (i >= 0) {
      this.queue.splice(i, 1);
      this.finish(job, false, null);
    } else if (this.active.includes(job)) {
      // The innermost code gets the SIGINT: the job itself, or a run nested in its call, whose
      // handler learns through ctx.signal and whose reply then interrupts the job.
      job.calls?.abort();
      void this.stop(job);
    }
  }

  /**
   * An interrupt request naming the run, then one SIGINT, then a restart if `job` is still running
   * once the kernel was given the grace period (TimeGiven: a loaded machine does not shorten it).
   * The kernel keeps a request that lands while it compiles the run until the run's code starts,
   * ignores one for a run that ended, and raises once per request, so nothing is sent again.
   */
  private stop(job: Job): Promise<InterruptHow> {
    if (job.stopping) return job.stopping;
    job.interrupted = true;
    this.sigint(job);
    const p = this.proc;
    const given = TimeGiven.of(p?.info?.pid, p?.child.pid);
    job.stopping = new Promise<InterruptHow>((resolve) => {
      const poll = setInterval(() => {
        if (given.read() < INTERRUPT_GRACE_MS) return;
        clearInterval(poll);
        job.onEnd = undefined;
        if (!this.active.includes(job)) return resolve('sigint');
        this.opts.log?.(`kernel: run ${job.id} did not stop within ${INTERRUPT_GRACE_MS} ms of SIGINT; restarting the kernel`);
        this.restartCount++;
        this.lost = 'the kernel was restarted when an interrupt did not stop a run';
        this.killProc();
        this.failAll(
          KERNEL_RESTARTED,
          `The run did not stop within ${INTERRUPT_GRACE_MS / 1000} s of an interrupt (SIGINT), so the kernel was restarted: its state (variables, imports) is lost.`,
          true,
        );
        if (!this.disposed) this.ensureProc(); // the next run finds it ready
        resolve('restart');
      }, GRACE_POLL_MS);
      job.onEnd = () => {
        clearInterval(poll);
        resolve('sigint');
      };
    });
    return job.stopping;
  }

  /** Asks the kernel to interrupt `job` (the innermost code gets it): the request, then SIGINT to its process group. */
  private sigint(job: Job): void {
    const inner = this.active[this.active.length - 1];
    if (!inner || !this.proc?.alive) return;
    const now = Date.now();
    if (this.lastSigint?.job === inner && now - this.lastSigint.at < SIGINT_COALESCE_MS) return;
    this.lastSigint = { job: inner, at: now };
    this.proc.send({ op: 'interrupt', id: job.id });
    this.proc.signal('SIGINT');
  }

  private activeJob(id: number | null): Job | undefined {
    return id === null ? undefined : this.active.find((j) => j.id === id);
  }

  private finish(
    job: Job,
    success: boolean,
    value: MimeBundle | null,
    restarted?: boolean,
    executionCount?: number,
    dataflow?: RunDataflow,
  ): void {
    if (job.onAbort) job.signal?.removeEventListener('abort', job.onAbort);
    job.onEnd?.();
    const status: RunOutcome = success ? 'succeeded' : job.interrupted || job.aborted || restarted ? 'interrupted' : 'failed';
    job.resolve({
      success,
      status,
      value,
      ...(restarted && { restarted: true }),
      ...(executionCount !== undefined && { executionCount }),
      ...(dataflow && { dataflow }),
    });
  }

  private fail(job: Job, name: string, message: string, restarted?: boolean): void {
    emit(job, { kind: 'error', name, message, traceback: `${name}: ${message}\n` }, this.opts.log);
    this.finish(job, false, null, restarted);
  }

  private failAll(name: string, message: string, restarted?: boolean): void {
    const jobs = [...this.active.reverse(), ...this.queue];
    const queued = new Set(this.queue);
    this.active.length = 0;
    this.queue.length = 0;
    for (const job of jobs) {
      job.calls?.abort();
      // A queued run lost nothing but its turn: it says so, rather than the running one's story.
      this.fail(job, name, restarted && queued.has(job) ? RESTARTED_QUEUED_MESSAGE : message, restarted);
    }
  }

  private killProc(): void {
    const p = this.proc;
    this.proc = null;
    p?.kill();
    this.failInspects('The kernel was restarted before it answered.');
  }

  private failInspects(message: string): void {
    for (const { settle } of [...this.inspects.values()]) settle(undefined, new Error(message));
  }

  /** @internal from KernelChild */
  onMessage(p: KernelChild, msg: KernelMessage): void {
    if (p !== this.proc) return;
    switch (msg.type) {
      case 'stream': {
        const job = this.activeJob(msg.id);
        if (job) emit(job, { kind: 'stream', name: msg.name, text: msg.text }, this.opts.log);
        else this.stray.add(msg.name, msg.text, msg.id === null ? 'written between runs' : `of run ${msg.id}, which ended`);
        return;
      }
      case 'display': {
        const job = this.activeJob(msg.id);
        if (job)
          emit(
            job,
            {
              kind: 'display',
              data: msg.data,
              ...(msg.metadata && { metadata: msg.metadata }),
              ...(typeof msg.execution_count === 'number' && { executionCount: msg.execution_count }),
            },
            this.opts.log,
          );
        else this.stray.add('stdout', `[display output: ${Object.keys(msg.data).join(', ')}]\n`, `of run ${msg.id}`);
        return;
      }
      case 'error': {
        const job = this.activeJob(msg.id);
        if (job) emit(job, { kind: 'error', name: msg.name, message: msg.message, traceback: msg.traceback }, this.opts.log);
        else this.stray.add('stderr', msg.traceback, `of run ${msg.id}`);
        return;
      }
      case 'done': {
        const job = this.activeJob(msg.id);
        if (!job) {
          this.opts.log?.(`kernel: done for unknown run ${msg.id}`);
          return;
        }
        this.active.splice(this.active.indexOf(job), 1);
        job.calls?.abort();
        if (typeof msg.execution_count === 'number') this.cellCount = job.count = msg.execution_count;
        else if (p.info?.ipython) job.count = undefined; // IPython did not count it (an empty cell)
        this.finish(job, msg.success && !job.hostFailed, msg.value ?? null, false, job.count, runDataflow(msg.dataflow));
        this.pump();
        return;
      }
      case 'call':
        this.answerCall(p, msg.rid, msg.id ?? null, msg.method, msg.params);
        return;
      case 'inspected':
        this.inspects.get(msg.qid)?.settle(msg.result);
        return;
      default:
        return;
    }
  }

  /** @internal from KernelChild: the kernel's own fds 1/2, which no run owns (runs get pipes of their own). */
  onStdio(_p: KernelChild, name: StreamName, text: string): void {
    this.stray.add(name, text, 'the kernel process itself, or a subprocess started between runs');
  }

  /** @internal from KernelChild: a message too large to take was skipped; the run it belonged to fails. */
  onOversize(p: KernelChild, frame: OversizeFrame): void {
    if (p !== this.proc) return;
    const what = `A kernel message of ${frame.bytes} bytes (${frame.type ?? 'of unknown type'}) is over the limit of ${MAX_FRAME_BYTES} bytes`;
    this.opts.log?.(`kernel: ${what}; skipped`);
    if (frame.type === 'call' && frame.rid !== undefined) {
      p.send({ op: 'reply', rid: frame.rid, error: `${what}: send smaller parameters.` });
      return;
    }
    const job = this.activeJob(frame.id ?? null);
    if (!job) return;
    const message = `${what}, so it was dropped and the run failed.`;
    emit(
      job,
      { kind: 'error', name: KERNEL_OUTPUT_TOO_LARGE, message, traceback: `${KERNEL_OUTPUT_TOO_LARGE}: ${message}\n` },
      this.opts.log,
    );
    job.hostFailed = true;
    if (frame.type === 'done') {
      this.active.splice(this.active.indexOf(job), 1);
      job.calls?.abort();
      this.finish(job, false, null);
      this.pump();
    }
  }

  /** @internal from KernelChild, once its pipes have drained after exit. */
  onDead(p: KernelChild, code: number | null, signal: string | null): void {
    const expected = p.expectedExit;
    this.opts.log?.(`kernel pid ${p.child.pid ?? '?'} exited (code ${code}, signal ${signal})${expected ? '' : ' unexpectedly'}`);
    // Before ready, the ready promise's rejection (already settled) fails the queue instead.
    if (this.proc === p && p.info) {
      this.proc = null;
      this.failInspects('The kernel process exited before it answered.');
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      const tail = p.stderrTail.trim();
      this.lost = `the kernel process ${how}`;
      this.failAll(KERNEL_DIED, `The kernel process ${how}.${tail ? `\nLast stderr output:\n${tail}` : ''}`);
    }
    if (p.info) {
      try {
        this.opts.onExit?.({ code, signal, expected });
      } catch (err) {
        this.opts.log?.(`kernel onExit handler threw: ${errorMessage(err)}`);
      }
    }
  }

  private answerCall(p: KernelChild, rid: number, runId: number | null, method: string, params: unknown): void {
    const handler = this.opts.onCall;
    if (!handler) {
      p.send({ op: 'reply', rid, error: `The host does not answer calls (method "${method}").` });
      return;
    }
    const job = this.activeJob(runId);
    if (job) {
      job.openCalls++;
      job.calls ??= new AbortController();
    }
    const ctx: CallContext = {
      run: job && { mode: job.mode, owner: job.owner },
      emit: (output) => {
        if (job && this.active.includes(job)) emit(job, output, this.opts.log);
      },
      signal: job?.calls?.signal ?? new AbortController().signal,
    };
    const reply = (answer: { result: unknown } | { error: string; refused: boolean }) => {
      if (job) job.openCalls = Math.max(0, job.openCalls - 1);
      if (job?.aborted && this.active.includes(job)) {
        p.send({ op: 'reply', rid, error: 'The run was interrupted.', interrupt: true });
      } else if ('error' in answer) {
        p.send({ op: 'reply', rid, error: answer.error, ...(answer.refused && { refused: true }) });
      } else {
        try {
          p.send({ op: 'reply', rid, result: answer.result === undefined ? null : answer.result });
        } catch (err) {
          p.send({ op: 'reply', rid, error: `The result of "${method}" is not JSON: ${errorMessage(err)}` });
        }
      }
    };
    let answer: Promise<unknown>;
    try {
      answer = Promise.resolve(handler(method, params, ctx));
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer.then(
      (result) => reply({ result }),
      (err: unknown) => reply({ error: errorMessage(err), refused: err instanceof BridgeError && err.kind === 'refused' }),
    );
    // The caller now waits: a queued run can go ahead, nested in it.
    if (job) this.pump();
  }
}

/** What the first run after a restart or a death is told before its own output. */
export const lostStateNote = (why: string) =>
  `Kernel state was lost: ${why} since the last run, so variables and imports from earlier runs are gone; re-run the cells that define them.`;

function emit(job: Job, output: KernelOutput, log: ((line: string) => void) | undefined): void {
  try {
    job.onOutput(output);
  } catch (err) {
    log?.(`kernel output handler threw: ${errorMessage(err)}`);
  }
}

/** A run's record as kernel_dataflow.py sends it, or undefined when it is not one (lists of names). */
function runDataflow(value: unknown): RunDataflow | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const names = (key: string) => {
    const list = (value as Record<string, unknown>)[key];
    return Array.isArray(list) && list.every((n) => typeof n === 'string') ? (list as string[]) : undefined;
  };
  const [reads, defines, mutates] = [names('reads'), names('defines'), names('mutates')];
  return reads && defines && mutates ? { reads, defines, mutates } : undefined;
}
