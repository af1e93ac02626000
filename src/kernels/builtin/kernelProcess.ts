/**
 * Driver of the builtin Python kernel (kernel.py), one process per notebook. No `vscode` import:
 * the extension and plain unit tests both use it.
 *
 * Wire protocol: `python -u kernel.py 3 4` with stdio [ignore, pipe, pipe, pipe, pipe]. stdin is
 * /dev/null (input() raises EOFError). fd 3 carries requests, fd 4 kernel messages, one JSON
 * object per line, UTF-8. fds 1/2 are the real stdout/stderr: OS-level output (subprocesses,
 * C code) is forwarded as stream output of the run in progress, or logged while idle.
 *
 *   host -> kernel  {"op":"execute","id","code","mode":"cell"|"scratchpad"}
 *                   {"op":"reply","rid","result"} | {"op":"reply","rid","error"}
 *   kernel -> host  {"type":"ready","pid","python"}           once, at start
 *                   {"type":"stream","id","name","text"}      id null while idle
 *                   {"type":"display","id","data":{mime:str}}
 *                   {"type":"error","id","name","message","traceback"}
 *                   {"type":"done","id","success","value":{mime:str}|null}   ends every run
 *                   {"type":"call","rid","method","params"}   Python blocks until our reply
 *
 * Python reaches `call` through `import _agent_bridge_host; _agent_bridge_host.call(method, params)`.
 * SIGINT (sent to the kernel's process group) interrupts the running code; the kernel ignores it
 * while idle. Closing fd 3 makes the kernel exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { MimeBundle, StreamName } from '../../core/kernel';

export type RunMode = 'cell' | 'scratchpad';

export type HostRequest =
  | { op: 'execute'; id: number; code: string; mode: RunMode }
  | { op: 'reply'; rid: number; result: unknown }
  | { op: 'reply'; rid: number; error: string };

export type KernelMessage =
  | { type: 'ready'; pid: number; python: string }
  | { type: 'stream'; id: number | null; name: StreamName; text: string }
  | { type: 'display'; id: number | null; data: MimeBundle }
  | { type: 'error'; id: number | null; name: string; message: string; traceback: string }
  | { type: 'done'; id: number; success: boolean; value: MimeBundle | null }
  | { type: 'call'; rid: number; method: string; params: unknown };

export type KernelOutput =
  | { kind: 'stream'; name: StreamName; text: string }
  | { kind: 'display'; data: MimeBundle }
  | { kind: 'error'; name: string; message: string; traceback: string };

/** `cancelled`: the run was aborted through its signal (dropped from the queue, or interrupted). */
export interface RunResult {
  success: boolean;
  value: MimeBundle | null;
  cancelled?: boolean;
}

export interface KernelInfo {
  pid: number;
  python: string;
}

export interface KernelExitInfo {
  code: number | null;
  signal: string | null;
  /** true when dispose() or restart() killed it. */
  expected: boolean;
}

export interface KernelProcessOptions {
  python: string;
  /** Absolute path of kernel.py. */
  script: string;
  cwd?: string;
  /** Base environment (default process.env); MPLBACKEND=Agg and UTF-8 I/O are forced on top. */
  env?: NodeJS.ProcessEnv;
  /** Answers `_agent_bridge_host.call()`; a rejection becomes HostCallError in Python. */
  onCall?: (method: string, params: unknown) => Promise<unknown>;
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
/** After `exit`, how long to wait for the pipes to deliver what the process wrote last. */
const EXIT_DRAIN_MS = 200;

interface Job {
  readonly id: number;
  readonly code: string;
  readonly mode: RunMode;
  readonly onOutput: (o: KernelOutput) => void;
  readonly resolve: (r: RunResult) => void;
  readonly signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  aborted: boolean;
}

export class KernelProcess {
  private proc: Proc | null = null;
  private current: Job | null = null;
  private readonly queue: Job[] = [];
  private nextId = 0;
  private disposed = false;

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

  run(code: string, mode: RunMode, onOutput: (o: KernelOutput) => void, signal?: AbortSignal): Promise<RunResult> {
    return new Promise<RunResult>((resolve) => {
      if (signal?.aborted) return resolve({ success: false, value: null, cancelled: true });
      const job: Job = { id: ++this.nextId, code, mode, onOutput, resolve, signal, onAbort: undefined, aborted: false };
      if (this.disposed) return this.fail(job, KERNEL_DISPOSED, 'The kernel was disposed.');
      if (signal) {
        job.onAbort = () => this.abort(job);
        signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** SIGINT to the kernel (and its subprocesses) if a run is in progress. */
  interrupt(): void {
    if (this.current && this.proc?.alive) this.proc.signal('SIGINT');
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
    if (this.proc && (this.proc.alive || this.current)) return this.proc;
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

  private pump(): void {
    if (this.current || this.queue.length === 0 || this.disposed) return;
    const p = this.ensureProc();
    if (!p.info) return; // pumped again on ready
    const job = this.queue.shift() as Job;
    this.current = job;
    p.stderrTail = '';
    p.send({ op: 'execute', id: job.id, code: job.code, mode: job.mode });
  }

  private abort(job: Job): void {
    job.aborted = true;
    const i = this.queue.indexOf(job);
    if (i >= 0) {
      this.queue.splice(i, 1);
      this.finish(job, { success: false, value: null });
    } else if (this.current === job) {
      this.interrupt();
    }
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
    const jobs = this.current ? [this.current, ...this.queue] : [...this.queue];
    this.current = null;
    this.queue.length = 0;
    for (const job of jobs) this.fail(job, name, message);
  }

  private killProc(): void {
    const p = this.proc;
    this.proc = null;
    p?.kill();
  }

  /** @internal from Proc */
  onMessage(p: Proc, msg: KernelMessage): void {
    if (p !== this.proc) return;
    const cur = this.current;
    switch (msg.type) {
      case 'stream':
        if (cur && msg.id === cur.id) emit(cur, { kind: 'stream', name: msg.name, text: msg.text }, this.opts.log);
        else this.opts.log?.(`kernel ${msg.name} (idle): ${msg.text}`);
        return;
      case 'display':
        if (cur && msg.id === cur.id) emit(cur, { kind: 'display', data: msg.data }, this.opts.log);
        return;
      case 'error':
        if (cur && msg.id === cur.id) {
          emit(cur, { kind: 'error', name: msg.name, message: msg.message, traceback: msg.traceback }, this.opts.log);
        }
        return;
      case 'done':
        if (!cur || msg.id !== cur.id) {
          this.opts.log?.(`kernel: done for unknown run ${msg.id}`);
          return;
        }
        this.current = null;
        this.finish(cur, { success: msg.success, value: msg.value ?? null });
        this.pump();
        return;
      case 'call':
        this.answerCall(p, msg.rid, msg.method, msg.params);
        return;
      default:
        return;
    }
  }

  /** @internal from Proc: OS-level output on fds 1/2. */
  onStdio(p: Proc, name: StreamName, text: string): void {
    const cur = this.current;
    if (p === this.proc && cur) emit(cur, { kind: 'stream', name, text }, this.opts.log);
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

  private answerCall(p: Proc, rid: number, method: string, params: unknown): void {
    const handler = this.opts.onCall;
    if (!handler) {
      p.send({ op: 'reply', rid, error: `The host does not answer calls (method "${method}").` });
      return;
    }
    let answer: Promise<unknown>;
    try {
      answer = Promise.resolve(handler(method, params));
    } catch (err) {
      answer = Promise.reject(err);
    }
    answer.then(
      (result) => {
        try {
          p.send({ op: 'reply', rid, result: result === undefined ? null : result });
        } catch (err) {
          p.send({ op: 'reply', rid, error: `The result of "${method}" is not JSON: ${errorText(err)}` });
        }
      },
      (err: unknown) => p.send({ op: 'reply', rid, error: errorText(err) }),
    );
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
    const env: NodeJS.ProcessEnv = { ...(opts.env ?? process.env), MPLBACKEND: 'Agg', PYTHONIOENCODING: 'utf-8', PYTHONUNBUFFERED: '1' };
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
    for (const s of [stdout, stderr, fromKernel, this.toKernel]) s.on('error', (err) => opts.log?.(`kernel pipe error: ${err.message}`));
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
      if (this.settleReady) this.settleReady(new Error(`Could not start the Python kernel with "${opts.python}": ${err.message}`));
      if (this.child.pid === undefined) this.onExit(null, null);
    });
    this.child.on('exit', (code, signal) => this.onExit(code, signal));
    this.startTimer = setTimeout(() => {
      if (!this.settleReady) return;
      this.settleReady(new Error(`The Python kernel ("${opts.python}") did not start within ${this.startTimeout} ms.${this.tailNote()}`));
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
      this.info = { pid: msg.pid, python: msg.python };
      this.opts.log?.(`kernel ready: pid ${msg.pid}, Python ${msg.python}`);
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
