/**
 * Driver of the builtin Python kernel (kernel.py), one process per notebook. No `vscode` import:
 * the extension and plain unit tests both use it.
 *
 * Wire protocol: `python -u kernel.py 3 4` with stdio [ignore, pipe, pipe, pipe, pipe]. stdin is
 * /dev/null (input() raises EOFError). fd 3 carries requests, fd 4 kernel messages, one JSON
 * object per line, UTF-8. fds 1/2 are the real stdout/stderr: OS-level output (subprocesses,
 * C code) is forwarded as stream output of the run in progress, or logged while idle.
 *
 *   host -> kernel  {"op":"execute","id","code","mode":"cell"|"scratchpad"[,"cell":{"id","index"}]}
 *                   {"op":"reply","rid","result"} | {"op":"reply","rid","error"[,"interrupt":true]}
 *   kernel -> host  {"type":"ready","pid","python","ipython":str|null}   once, at start
 *                   {"type":"stream","id","name","text"}      id null while idle
 *                   {"type":"display","id","data":{mime:str}[,"metadata"][,"execution_count"]}
 *                   {"type":"error","id","name","message","traceback"}
 *                   {"type":"done","id","success","value":{mime:str}|null[,"execution_count"]}   ends every run
 *                   {"type":"call","rid","id","method","params"}   run `id` blocks until our reply
 *
 * `cell` names the notebook cell in tracebacks (`<cell id …, index …>`). Where the kernel's Python
 * has IPython (`ready.ipython`, its version), runs go through IPython's InteractiveShell: a cell's
 * value arrives as a `display` with `execution_count` (Jupyter's execute_result, in output order:
 * before the figures shown after the cell) and the cell's `done` carries its execution count;
 * `done.value` is then only a scratchpad run's value. Without IPython a cell's value is
 * `done.value`. `metadata` is the display's Jupyter output metadata. AGENT_BRIDGE_IPYTHON=0 in
 * the environment keeps the kernel plain Python.
 *
 * Python reaches `call` through `import _agent_bridge_host; _agent_bridge_host.call(method, params)`.
 * Runs are re-entrant: while the innermost run is blocked in a call, the next queued run is sent
 * at once and the kernel runs it nested, on its main thread, while the caller waits (a call may
 * be answered by running cells, which would otherwise queue behind their caller forever). Each
 * run keeps its own id, so output is routed per run. SIGINT (sent to the kernel's process group)
 * interrupts the innermost running code; the kernel ignores it while idle. Closing fd 3 makes
 * the kernel exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { MimeBundle, StreamName } from '../../core/kernel';

export type RunMode = 'cell' | 'scratchpad';

/** The notebook cell a run comes from, as the person sees it (tracebacks name it). */
export interface CellName {
  id: string;
  index: number;
}

/** Jupyter's output metadata of a display (e.g. an image's size). */
export type DisplayMetadata = Record<string, unknown>;

export type HostRequest =
  | { op: 'execute'; id: number; code: string; mode: RunMode; cell?: CellName }
  | { op: 'reply'; rid: number; result: unknown }
  | { op: 'reply'; rid: number; error: string; interrupt?: true };

export type KernelMessage =
  | { type: 'ready'; pid: number; python: string; ipython?: string | null }
  | { type: 'stream'; id: number | null; name: StreamName; text: string }
  | { type: 'display'; id: number | null; data: MimeBundle; metadata?: DisplayMetadata; execution_count?: number }
  | { type: 'error'; id: number | null; name: string; message: string; traceback: string }
  | { type: 'done'; id: number; success: boolean; value: MimeBundle | null; execution_count?: number }
  | { type: 'call'; rid: number; id: number | null; method: string; params: unknown };

export type KernelOutput =
  | { kind: 'stream'; name: StreamName; text: string }
  /** `executionCount`: the cell's value (Jupyter's execute_result), else display_data. */
  | { kind: 'display'; data: MimeBundle; metadata?: DisplayMetadata; executionCount?: number }
  | { kind: 'error'; name: string; message: string; traceback: string };

/**
 * `cancelled`: the run was aborted through its signal (dropped from the queue, or interrupted).
 * `executionCount`: the cell's execution count, where the kernel keeps one (IPython).
 */
export interface RunResult {
  success: boolean;
  value: MimeBundle | null;
  cancelled?: boolean;
  executionCount?: number;
}

export interface KernelInfo {
  pid: number;
  python: string;
  /** IPython's version when runs go through IPython, else null (plain Python). */
  ipython: string | null;
}

export interface KernelExitInfo {
  code: number | null;
  signal: string | null;
  /** true when dispose() or restart() killed it. */
  expected: boolean;
}

/** What a call handler knows of the run that called. */
export interface CallContext {
  /** Id of the calling run; null for a call made outside any run (from a thread of a run that ended). */
  readonly runId: number | null;
  /** Output into the calling run, as if it had printed it; dropped once that run ended. */
  emit(output: KernelOutput): void;
  /** Aborted when the calling run is aborted (its client went away; the reply then interrupts it) or ends. */
  readonly signal: AbortSignal;
}

/** Answers `_agent_bridge_host.call()`; a rejection becomes HostCallError in Python. */
export type CallHandler = (method: string, params: unknown, ctx: CallContext) => Promise<unknown>;

export interface KernelProcessOptions {
  python: string;
  /** Absolute path of kernel.py. */
  script: string;
  cwd?: string;
  /** Base environment (default process.env), read at every spawn; MPLBACKEND=Agg and UTF-8 I/O are forced on top. */
  env?: NodeJS.ProcessEnv | (() => NodeJS.ProcessEnv);
  onCall?: CallHandler;
  /** Fires when a kernel that was ready exits (start failures reject start() instead). */
  onExit?: (info: KernelExitInfo) => void;
  log?: (line: string) => void;
  /** How long start() waits for `ready` (default 30 s). */
  startTimeoutMs?: number;
}

/** Error output names the driver itself produces. */
export const KERNEL_DIED = 'KernelDied';
export const KERNEL_RESTARTED = 'KernelRestarted';
export const KERNEL_DISPOSED = 'KernelDisposed';
export const KERNEL_START_FAILED = 'KernelStartFailed';

const STDERR_TAIL_CHARS = 2000;
/** Interrupts of the same innermost run this close together send one SIGINT: a second one could
 * reach the run it is nested in, once the first has ended the inner one. */
const SIGINT_COALESCE_MS = 250;
/** After `exit`, how long to wait for the pipes to deliver what the process wrote last. */
const EXIT_DRAIN_MS = 200;

interface Job {
  readonly id: number;
  readonly code: string;
  readonly mode: RunMode;
  readonly cell: CellName | undefined;
  readonly onOutput: (o: KernelOutput) => void;
  readonly resolve: (r: RunResult) => void;
  readonly signal: AbortSignal | undefined;
  readonly onStart: (() => void) | undefined;
  onAbort: (() => void) | undefined;
  aborted: boolean;
  /** Host calls of this run not answered yet: while > 0 the run waits, and runs may nest in it. */
  openCalls: number;
  /** Aborts the calls' handlers when the run is aborted (made on the first call). */
  calls: AbortController | undefined;
}

export class KernelProcess {
  private proc: Proc | null = null;
  /** Runs sent to the kernel and not done, outermost first: each later one nests in the one before. */
  private readonly active: Job[] = [];
  private readonly queue: Job[] = [];
  private nextId = 0;
  private disposed = false;
  private lastSigint: { job: Job; at: number } | undefined;

  constructor(private readonly opts: KernelProcessOptions) {}

  /** Process alive (spawned and not yet exited). */
  get running(): boolean {
    return this.proc !== null && this.proc.alive;
  }

  /** pid and Python version once the kernel is ready. */
  get info(): KernelInfo | null {
    return this.proc?.info ?? null;
  }

  /** Resolves on `ready`; rejects with the reason (and stderr tail) if the kernel cannot start. */
  start(): Promise<void> {
    if (this.disposed) return Promise.reject(new Error('The kernel was disposed.'));
    return this.ensureProc().ready;
  }

  /**
   * Queues a run; resolves when it is done (never rejects). `onStart` fires when the run is sent
   * to the kernel: its turn came (not for runs dropped or failed before that). `cell` names the
   * notebook cell a cell run comes from.
   */
  run(
    code: string,
    mode: RunMode,
    onOutput: (o: KernelOutput) => void,
    signal?: AbortSignal,
    onStart?: () => void,
    cell?: CellName,
  ): Promise<RunResult> {
    return new Promise<RunResult>((resolve) => {
      if (signal?.aborted) return resolve({ success: false, value: null, cancelled: true });
      const job: Job = {
        id: ++this.nextId,
        code,
        mode,
        cell,
        onOutput,
        resolve,
        signal,
        onStart,
        onAbort: undefined,
        aborted: false,
        openCalls: 0,
        calls: undefined,
      };
      if (this.disposed) return this.fail(job, KERNEL_DISPOSED, 'The kernel was disposed.');
      if (signal) {
        job.onAbort = () => this.abort(job);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** SIGINT to the kernel (and its subprocesses) if a run is in progress: the innermost run's code gets it. */
  interrupt(): void {
    const inner = this.active[this.active.length - 1];
    if (!inner || !this.proc?.alive) return;
    const now = Date.now();
    if (this.lastSigint?.job === inner && now - this.lastSigint.at < SIGINT_COALESCE_MS) return;
    this.lastSigint = { job: inner, at: now };
    this.proc.signal('SIGINT');
  }

  async restart(): Promise<void> {
    if (this.disposed) throw new Error('The kernel was disposed.');
    this.killProc();
    this.failAll(KERNEL_RESTARTED, 'The kernel was restarted before the run completed.');
    await this.start();
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.killProc();
    this.failAll(KERNEL_DISPOSED, 'The kernel was disposed before the run completed.');
  }

  // ---- internals ----

  private ensureProc(): Proc {
    // A process that exited but whose pipes are still draining is replaced, unless its
    // in-flight run is waiting to be failed by onDead.
    if (this.proc && (this.proc.alive || this.active.length)) return this.proc;
    const p = new Proc(this.opts, this);
    this.proc = p;
    p.ready.then(
      () => {
        if (this.proc === p) this.pump();
      },
      (err: unknown) => {
        if (this.proc !== p) return;
        this.proc = null;
        this.failAll(KERNEL_START_FAILED, errorText(err));
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
    p.send({ op: 'execute', id: job.id, code: job.code, mode: job.mode, ...(job.cell && { cell: job.cell }) });
    try {
      job.onStart?.();
    } catch (err) {
      this.opts.log?.(`kernel onStart handler threw: ${errorText(err)}`);
    }
  }

  private abort(job: Job): void {
    job.aborted = true;
    const i = this.queue.indexOf(job);
    if (i >= 0) {
      this.queue.splice(i, 1);
      this.finish(job, { success: false, value: null });
    } else if (this.active.includes(job)) {
      // The innermost code gets the SIGINT: the job itself, or a run nested in its call, whose
      // handler learns through ctx.signal and whose reply then interrupts the job.
      job.calls?.abort();
      this.interrupt();
    }
  }

  private activeJob(id: number | null): Job | undefined {
    return id === null ? undefined : this.active.find((j) => j.id === id);
  }

  private finish(job: Job, result: RunResult): void {
    if (job.onAbort) job.signal?.removeEventListener('abort', job.onAbort);
    if (job.aborted && !result.success) result.cancelled = true;
    job.resolve(result);
  }

  private fail(job: Job, name: string, message: string): void {
    emit(job, { kind: 'error', name, message, traceback: `${name}: ${message}\n` }, this.opts.log);
    this.finish(job, { success: false, value: null });
  }

  private failAll(name: string, message: string): void {
    const jobs = [...this.active.reverse(), ...this.queue];
    this.active.length = 0;
    this.queue.length = 0;
    for (const job of jobs) {
      job.calls?.abort();
      this.fail(job, name, message);
    }
  }

  private killProc(): void {
    const p = this.proc;
    this.proc = null;
    p?.kill();
  }

  /** @internal from Proc */
  onMessage(p: Proc, msg: KernelMessage): void {
    if (p !== this.proc) return;
    switch (msg.type) {
      case 'stream': {
        const job = this.activeJob(msg.id);
        if (job) emit(job, { kind: 'stream', name: msg.name, text: msg.text }, this.opts.log);
        else this.opts.log?.(`kernel ${msg.name} (idle): ${msg.text}`);
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
        return;
      }
      case 'error': {
        const job = this.activeJob(msg.id);
        if (job) emit(job, { kind: 'error', name: msg.name, message: msg.message, traceback: msg.traceback }, this.opts.log);
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
        this.finish(job, {
          success: msg.success,
          value: msg.value ?? null,
          ...(typeof msg.execution_count === 'number' && { executionCount: msg.execution_count }),
        });
        this.pump();
        return;
      }
      case 'call':
        this.answerCall(p, msg.rid, msg.id ?? null, msg.method, msg.params);
        return;
      default:
        return;
    }
  }

  /** @internal from Proc: OS-level output on fds 1/2 (it cannot tell runs apart: the innermost gets it). */
  onStdio(p: Proc, name: StreamName, text: string): void {
    const inner = this.active[this.active.length - 1];
    if (p === this.proc && inner) emit(inner, { kind: 'stream', name, text }, this.opts.log);
    else this.opts.log?.(`kernel ${name}: ${text}`);
  }

  /** @internal from Proc, once its pipes have drained after exit. */
  onDead(p: Proc, code: number | null, signal: string | null): void {
    const expected = p.expectedExit;
    this.opts.log?.(`kernel pid ${p.child.pid ?? '?'} exited (code ${code}, signal ${signal})${expected ? '' : ' unexpectedly'}`);
    // Before ready, the ready promise's rejection (already settled) fails the queue instead.
    if (this.proc === p && p.info) {
      this.proc = null;
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      const tail = p.stderrTail.trim();
      this.failAll(KERNEL_DIED, `The kernel process ${how}.${tail ? `\nLast stderr output:\n${tail}` : ''}`);
    }
    if (p.info) {
      try {
        this.opts.onExit?.({ code, signal, expected });
      } catch (err) {
        this.opts.log?.(`kernel onExit handler threw: ${errorText(err)}`);
      }
    }
  }

  private answerCall(p: Proc, rid: number, runId: number | null, method: string, params: unknown): void {
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
      runId,
      emit: (output) => {
        if (job && this.active.includes(job)) emit(job, output, this.opts.log);
      },
      signal: job?.calls?.signal ?? new AbortController().signal,
    };
    const reply = (answer: { result: unknown } | { error: string }) => {
      if (job) job.openCalls = Math.max(0, job.openCalls - 1);
      if (job?.aborted && this.active.includes(job)) {
        p.send({ op: 'reply', rid, error: 'The run was interrupted.', interrupt: true });
      } else if ('error' in answer) {
        p.send({ op: 'reply', rid, error: answer.error });
      } else {
        try {
          p.send({ op: 'reply', rid, result: answer.result === undefined ? null : answer.result });
        } catch (err) {
          p.send({ op: 'reply', rid, error: `The result of "${method}" is not JSON: ${errorText(err)}` });
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
      (err: unknown) => reply({ error: errorText(err) }),
    );
    // The caller now waits: a queued run can go ahead, nested in it.
    if (job) this.pump();
  }
}

/** One spawned kernel process and its pipes. */
class Proc {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  info: KernelInfo | null = null;
  alive = true;
  expectedExit = false;
  stderrTail = '';
  private readonly toKernel: Writable;
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';
  private settleReady: ((err?: Error) => void) | null = null;
  private exitStatus: { code: number | null; signal: string | null } | null = null;
  private dead = false;
  private openPipes = 3; // fds 1, 2, 4
  private drainTimer: NodeJS.Timeout | null = null;
  private readonly startTimer: NodeJS.Timeout;

  constructor(
    private readonly opts: KernelProcessOptions,
    private readonly owner: KernelProcess,
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      this.settleReady = (err) => {
        this.settleReady = null;
        clearTimeout(this.startTimer);
        if (err) reject(err);
        else resolve();
      };
    });
    this.ready.catch(() => undefined); // callers that never await start() must not see an unhandled rejection
    // Inherited by subprocesses too: Python children then stream their output promptly, in UTF-8.
    const base = typeof opts.env === 'function' ? opts.env() : (opts.env ?? process.env);
    const env: NodeJS.ProcessEnv = { ...base, MPLBACKEND: 'Agg', PYTHONIOENCODING: 'utf-8', PYTHONUNBUFFERED: '1' };
    this.child = spawn(opts.python, ['-u', opts.script, '3', '4'], {
      cwd: opts.cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      // Own process group: interrupt and kill reach the subprocesses user code started.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    const stdio = this.child.stdio;
    this.toKernel = stdio[3] as Writable;
    const fromKernel = stdio[4] as Readable;
    const stdout = stdio[1] as Readable;
    const stderr = stdio[2] as Readable;
    for (const s of [stdout, stderr, fromKernel, this.toKernel])
      s.on('error', (err) => opts.log?.(`kernel pipe error: ${err.message}`));
    fromKernel.on('data', (chunk: Buffer) => this.onData(chunk));
    const outDecoder = new StringDecoder('utf8');
    const errDecoder = new StringDecoder('utf8');
    stdout.on('data', (chunk: Buffer) => {
      const text = outDecoder.write(chunk);
      if (text) owner.onStdio(this, 'stdout', text);
    });
    stderr.on('data', (chunk: Buffer) => {
      const text = errDecoder.write(chunk);
      if (!text) return;
      const tail = this.stderrTail + text;
      this.stderrTail = tail.length > STDERR_TAIL_CHARS ? tail.slice(-STDERR_TAIL_CHARS) : tail;
      owner.onStdio(this, 'stderr', text);
    });
    for (const s of [stdout, stderr, fromKernel]) s.on('close', () => this.pipeClosed());
    this.child.on('error', (err) => {
      // Spawn failures (ENOENT, EACCES) come here, possibly without an `exit`.
      opts.log?.(`kernel process error: ${err.message}`);
      if (this.settleReady)
        this.settleReady(new Error(`Could not start the Python kernel with "${opts.python}": ${err.message}`));
      if (this.child.pid === undefined) this.onExit(null, null);
    });
    this.child.on('exit', (code, signal) => this.onExit(code, signal));
    this.startTimer = setTimeout(() => {
      if (!this.settleReady) return;
      this.settleReady(
        new Error(`The Python kernel ("${opts.python}") did not start within ${this.startTimeout} ms.${this.tailNote()}`),
      );
      this.kill();
    }, this.startTimeout);
    this.startTimer.unref();
    opts.log?.(`kernel started: ${opts.python} ${opts.script} (pid ${this.child.pid ?? '?'})`);
  }

  private get startTimeout(): number {
    return this.opts.startTimeoutMs ?? 30_000;
  }

  send(req: HostRequest): void {
    if (!this.alive) return;
    this.toKernel.write(JSON.stringify(req) + '\n');
  }

  signal(sig: NodeJS.Signals): void {
    if (!this.alive || this.child.pid === undefined) return;
    try {
      if (process.platform !== 'win32') process.kill(-this.child.pid, sig);
      else this.child.kill(sig);
    } catch {
      try {
        this.child.kill(sig);
      } catch {
        // already gone
      }
    }
  }

  kill(): void {
    this.expectedExit = true;
    this.signal('SIGKILL');
  }

  private onData(chunk: Buffer): void {
    const text = this.decoder.write(chunk);
    let start = 0;
    let nl = text.indexOf('\n');
    if (nl === -1) {
      this.partial += text;
      return;
    }
    let pending = this.partial;
    this.partial = '';
    while (nl !== -1) {
      const line = pending ? pending + text.slice(start, nl) : text.slice(start, nl);
      pending = '';
      start = nl + 1;
      if (line) this.onLine(line);
      nl = text.indexOf('\n', start);
    }
    this.partial = text.slice(start);
  }

  private onLine(line: string): void {
    let msg: KernelMessage;
    try {
      msg = JSON.parse(line) as KernelMessage;
    } catch {
      this.opts.log?.(`kernel: unparsable message: ${line.slice(0, 200)}`);
      return;
    }
    if (msg.type === 'ready') {
      this.info = { pid: msg.pid, python: msg.python, ipython: msg.ipython ?? null };
      this.opts.log?.(
        `kernel ready: pid ${msg.pid}, Python ${msg.python}, ${msg.ipython ? `IPython ${msg.ipython}` : 'no IPython'}`,
      );
      this.settleReady?.();
      return;
    }
    this.owner.onMessage(this, msg);
  }

  private onExit(code: number | null, signal: string | null): void {
    if (this.exitStatus) return;
    this.alive = false;
    this.exitStatus = { code, signal };
    if (this.openPipes <= 0) this.finalize();
    else this.drainTimer = setTimeout(() => this.finalize(), EXIT_DRAIN_MS);
  }

  private pipeClosed(): void {
    this.openPipes--;
    if (this.openPipes <= 0 && this.exitStatus) this.finalize();
  }

  /** Exit is final once the pipes delivered the last words (a grandchild may hold them open: capped). */
  private finalize(): void {
    if (this.dead || !this.exitStatus) return;
    this.dead = true;
    if (this.drainTimer) clearTimeout(this.drainTimer);
    // Subprocesses outlive a crashed kernel in its group: end them, as dispose() would have, and
    // let go of the fds 1/2 they hold, which would keep the host's event loop alive.
    if (process.platform !== 'win32' && this.child.pid !== undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // group already empty
      }
    }
    for (const s of this.child.stdio) s?.destroy();
    const { code, signal } = this.exitStatus;
    if (this.settleReady) {
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      this.settleReady(new Error(`The Python kernel ("${this.opts.python}") ${how} before it was ready.${this.tailNote()}`));
    }
    this.owner.onDead(this, code, signal);
  }

  private tailNote(): string {
    const tail = this.stderrTail.trim();
    return tail ? `\n${tail}` : '';
  }
}

function emit(job: Job, output: KernelOutput, log: ((line: string) => void) | undefined): void {
  try {
    job.onOutput(output);
  } catch (err) {
    log?.(`kernel output handler threw: ${errorText(err)}`);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
