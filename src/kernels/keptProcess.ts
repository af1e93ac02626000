import type { ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { Log } from '../core/log';
import { spawnCommand, type KernelCommand } from './builtin/kernelCommand';

/** Stopped after this long without a query: a Python kept for an agent at work, not for a window left open. */
const IDLE_MS = 60_000;
/** A query unanswered this long stops the process: it is stuck. */
const ANSWER_MS = 20_000;

export interface KeptProcessOptions {
  /** What it is, for the log ("the Python code check"). */
  what: string;
  /**
   * The program as it starts now: in the builtin kernel's sandbox while that is on. Asked before
   * each query; a process started another way (the sandbox turned on or off, another Python) is
   * stopped first, so none outlives the way it should run.
   */
  command: () => KernelCommand;
  /** Whether a line it printed is an answer (lines a .pth or a warning printed are not). */
  answers: (line: string) => boolean;
  log: Log;
  idleMs?: number;
  answerMs?: number;
}

interface Query {
  readonly line: string;
  readonly settle: (answer: string | undefined) => void;
  /** Sent once already, to a process that ended while answering it. */
  retried: boolean;
  timer?: NodeJS.Timeout;
}

interface Running {
  readonly child: ChildProcess;
  readonly key: string;
  /** Sent and not answered yet, oldest first: the process answers a line a query, in turn. */
  readonly queries: Query[];
  stdout: string;
  stderr: string;
  /** Stopped or ended: what it still prints is not read. */
  over: boolean;
}

/**
 * A helper program kept running between queries: a query a line on its stdin, an answer a line
 * on its stdout, in turn. The code check (kernel_inspect.py --serve) and the risk scan
 * (risk_scan.py) run this way: a Python start per question cost more than the answer. Started
 * on the first query, stopped when idle, on dispose, and when the way it should start changes;
 * one that ended (it exits past a memory bound of its own, or died) is started again for the next
 * query, and the queries it had not answered are sent once more.
 */
export class KeptProcess {
  private running: Running | undefined;
  private idle: NodeJS.Timeout | undefined;
  private disposed = false;

  constructor(private readonly options: KeptProcessOptions) {}

  /** The answer line to a query line (JSON, without its newline); undefined when no process answered. */
  ask(query: string): Promise<string | undefined> {
    if (this.disposed) return Promise.resolve(undefined);
    return new Promise((settle) => this.send({ line: `${query}\n`, settle, retried: false }));
  }

  /** The process's pid while one runs (for tests). */
  get pid(): number | undefined {
    return this.running?.over === false ? this.running.child.pid : undefined;
  }

  dispose(): void {
    this.disposed = true;
    this.stop();
  }

  private send(query: Query): void {
    clearTimeout(this.idle);
    const command = this.options.command();
    const key = JSON.stringify([command.command, command.args, command.env]);
    if (this.running && this.running.key !== key) this.stop();
    const running = (this.running ??= this.start(command, key));
    running.queries.push(query);
    query.timer = setTimeout(() => this.stuck(running, query), this.options.answerMs ?? ANSWER_MS);
    hold(running.child, true);
    (running.child.stdin as Writable).write(query.line);
  }

  private start(command: KernelCommand, key: string): Running {
    const child = spawnCommand(command, { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    const running: Running = { child, key, queries: [], stdout: '', stderr: '', over: false };
    const [input, output, errors] = child.stdio as unknown as [Writable, Readable, Readable];
    input.on('error', () => undefined); // it ended: 'close' says so
    output.setEncoding('utf8').on('data', (d: string) => this.read(running, d));
    errors.setEncoding('utf8').on('data', (d: string) => (running.stderr = (running.stderr + d).slice(-2000)));
    child.on('error', (error) => {
      this.options.log.warn(`${this.options.what} could not start ${command.command}: ${error.message}`);
      this.ended(running, false);
    });
    child.on('close', () => this.ended(running, true));
    return running;
  }

  /** Each whole answer line answers the oldest query. */
  private read(running: Running, data: string): void {
    if (running.over) return;
    running.stdout += data;
    if (!data.includes('\n')) return; // a large answer comes in many pieces: each is searched once
    let end: number;
    while ((end = running.stdout.indexOf('\n')) >= 0) {
      const line = running.stdout.slice(0, end);
      running.stdout = running.stdout.slice(end + 1);
      if (!this.options.answers(line)) continue;
      const query = running.queries.shift();
      if (!query) continue;
      clearTimeout(query.timer);
      query.settle(line);
    }
    if (!running.queries.length) this.rest(running);
  }

  /** No query waits: let Node exit past it, and stop it once idle. */
  private rest(running: Running): void {
    hold(running.child, false);
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.stop(), this.options.idleMs ?? IDLE_MS);
    this.idle.unref();
  }

  private stuck(running: Running, query: Query): void {
    const at = running.queries.indexOf(query);
    if (at < 0) return;
    running.queries.splice(at, 1);
    this.options.log.warn(`${this.options.what} gave no answer in ${(this.options.answerMs ?? ANSWER_MS) / 1000} s: stopped`);
    query.settle(undefined);
    this.kill(running); // the queries behind it go to a new process
  }

  private stop(): void {
    clearTimeout(this.idle);
    if (this.running) this.kill(this.running);
  }

  private kill(running: Running): void {
    if (this.running === running) this.running = undefined;
    if (!running.over) running.child.kill('SIGKILL');
    this.ended(running, true);
  }

  /**
   * It stopped or ended: the queries it had not answered go to a new process (`retry`). The one it
   * was answering goes once only (it may be what ended it); those behind it were not read yet.
   */
  private ended(running: Running, retry: boolean): void {
    if (this.running === running) this.running = undefined;
    running.over = true;
    hold(running.child, false);
    const queries = running.queries.splice(0);
    queries.forEach((query, at) => {
      clearTimeout(query.timer);
      if (retry && !this.disposed && (at > 0 || !query.retried)) {
        query.retried ||= at === 0;
        this.send(query);
      } else {
        const said = running.stderr.trim();
        this.options.log.warn(`${this.options.what} gave no answer${said ? `: ${said}` : ''}`);
        query.settle(undefined);
      }
    });
  }
}

/** Keeps Node's event loop running for the process while it owes answers, and not otherwise. */
function hold(child: ChildProcess, on: boolean): void {
  for (const handle of [child, ...child.stdio]) {
    const h = handle as { ref?: () => void; unref?: () => void } | null;
    if (on) h?.ref?.();
    else h?.unref?.();
  }
}
