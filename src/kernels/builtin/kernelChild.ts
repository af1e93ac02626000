/**
 * One spawned kernel.py process: `python -u kernel.py 3 4` with stdio [ignore, pipe, pipe, pipe,
 * pipe]. stdin is /dev/null (input() raises EOFError); fd 3 carries requests, fd 4 kernel
 * messages (see kernelWire.ts); fds 1/2 are the kernel's own stdout/stderr, which during a run
 * it points at pipes of that run, so what reaches the host here belongs to no run. Closing fd 3
 * makes the kernel exit.
 */
import type { ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { StreamName } from '../../core/model/kernelPort';
import { spawnCommand, type KernelCommand } from './kernelCommand';
import { LineFramer, MAX_FRAME_BYTES, type HostRequest, type KernelMessage, type OversizeFrame } from './kernelWire';

export interface KernelInfo {
  pid: number;
  python: string;
  /** IPython's version when runs go through IPython, else null (plain Python). */
  ipython: string | null;
}

export interface KernelChildOptions {
  python: string;
  /** Absolute path of kernel.py. */
  script: string;
  cwd?: string;
  /** Base environment (default process.env), read at every spawn; MPLBACKEND=Agg and UTF-8 I/O are forced on top. */
  env?: NodeJS.ProcessEnv | (() => NodeJS.ProcessEnv);
  log?: (line: string) => void;
  /** How long start() waits for `ready` (default 30 s). */
  startTimeoutMs?: number;
  /**
   * Runs the kernel through another program (the sandbox, kernelSandbox.ts), which may bring its
   * own environment, or as it is when undefined; asked at every spawn.
   */
  wrap?: (argv: string[], env: NodeJS.ProcessEnv) => KernelCommand | undefined;
}

/** What a child reports to its owner. */
export interface KernelChildEvents {
  onMessage(child: KernelChild, msg: KernelMessage): void;
  /** Output on the kernel's own fds 1/2 (no run's). */
  onStdio(child: KernelChild, name: StreamName, text: string): void;
  /** A message line over MAX_FRAME_BYTES was skipped. */
  onOversize(child: KernelChild, frame: OversizeFrame): void;
  /** Once its pipes have drained after exit. */
  onDead(child: KernelChild, code: number | null, signal: string | null): void;
}

const STDERR_TAIL_CHARS = 2000;
/** After `exit`, how long to wait for the pipes to deliver what the process wrote last. */
const EXIT_DRAIN_MS = 200;

/** One spawned kernel process and its pipes, from spawn to the last words after its exit. */
export class KernelChild {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  info: KernelInfo | null = null;
  alive = true;
  expectedExit = false;
  stderrTail = '';
  private readonly toKernel: Writable;
  private readonly framer: LineFramer;
  private settleReady: ((err?: Error) => void) | null = null;
  private exitStatus: { code: number | null; signal: string | null } | null = null;
  private dead = false;
  private openPipes = 3; // fds 1, 2, 4
  private drainTimer: NodeJS.Timeout | null = null;
  private readonly startTimer: NodeJS.Timeout;
  /** Where an interrupt goes, from the spawned pid (the sandbox's own session); absent: the spawned process's group. */
  private readonly interruptGroup: KernelCommand['interruptGroup'];

  constructor(
    private readonly opts: KernelChildOptions,
    private readonly owner: KernelChildEvents,
  ) {
    this.framer = new LineFramer(
      MAX_FRAME_BYTES,
      (line) => this.onLine(line),
      (frame) => owner.onOversize(this, frame),
    );
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
    const argv = [opts.python, '-u', opts.script, '3', '4'];
    const wrapped = opts.wrap?.(argv, env);
    this.interruptGroup = wrapped?.interruptGroup;
    this.child = spawnCommand(wrapped ?? { command: opts.python, args: argv.slice(1) }, {
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
    fromKernel.on('data', (chunk: Buffer) => this.framer.push(chunk));
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
    opts.log?.(`kernel started: ${opts.python} ${opts.script}${wrapped ? ' in a sandbox' : ''} (pid ${this.child.pid ?? '?'})`);
  }

  private get startTimeout(): number {
    return this.opts.startTimeoutMs ?? 30_000;
  }

  send(req: HostRequest): void {
    if (!this.alive) return;
    this.toKernel.write(JSON.stringify(req) + '\n');
  }

  /** To the kernel's process group: SIGINT to the one interrupts go to, anything else (a kill) to the spawned process's. */
  signal(sig: NodeJS.Signals): void {
    if (!this.alive || this.child.pid === undefined) return;
    const group = (sig === 'SIGINT' && this.interruptGroup?.(this.child.pid)) || this.child.pid;
    try {
      if (process.platform !== 'win32') process.kill(-group, sig);
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
