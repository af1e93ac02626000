import type { ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Log } from '../core/log';
import { namesOfCell, type RiskFinding, type RiskScanner, type ScanPlace } from '../core/model/riskScan';
import { errorMessage } from '../core/errorMessage';
import { spawnCommand, type KernelCommand } from './builtin/kernelCommand';

/** How long one question may take before the process is taken as stuck (a loaded machine is slow). */
const ANSWER_MS = 15_000;
/** Characters of code and context the answers kept hold, over all of them. */
const CACHED_CHARS = 4_000_000;

type Answer = { findings: RiskFinding[]; omitted?: number };

export interface RiskScannerOptions {
  /** The Python to read code with (the builtin kernel's, agentBridge.pythonPath). */
  python: () => string;
  /** risk_scan.py. */
  script: string;
  /** The workspace folders (writes inside them are medium, outside critical). */
  roots: () => readonly string[];
  home: string;
  /** The program as it starts: in the builtin kernel's sandbox while that is on, as the code check's. */
  wrap?: (argv: readonly string[], env: NodeJS.ProcessEnv) => KernelCommand | undefined;
  /** Whether the sandbox is on (a change starts the process again, in or out of it). */
  sandboxed?: () => boolean;
  log: Log;
}

/** The scan's process with its pipes. */
type ScanProcess = ChildProcess & { stdin: Writable; stdout: Readable; stderr: Readable };

/**
 * risk_scan.py in a process of its own, started on the first question and kept: a kernel's state
 * cannot reach it (code run earlier cannot change how later code is read), and no Python starts
 * per run. `-I -S`: no user site, no PYTHON* variables, no site-packages and their `.pth` files.
 * While agentBridge.kernel.sandbox is on it runs in the kernel's sandbox, as the code check does
 * (its Python is the kernel's, whose files a sandboxed run may have changed).
 * Questions go one a line, answers come back by id; answers are kept by their question (the
 * same code in the same place reads the same). A scan that cannot be made is a finding
 * ("unscanned"), never a silent pass.
 */
export class PythonRiskScanner implements RiskScanner {
  private child: ScanProcess | undefined;
  /** What the running process was started as: its Python, and whether in the sandbox. */
  private startedAs = '';
  private readonly pending = new Map<number, { resolve: (answer: Answer) => void; timer: NodeJS.Timeout }>();
  private nextId = 1;
  private readonly cache = new Map<string, Answer>();
  private cachedChars = 0;

  constructor(private readonly options: RiskScannerOptions) {}

  async scan(code: string, place: ScanPlace): Promise<Answer> {
    const question = {
      code,
      cwd: place.cwd ?? '',
      roots: this.options.roots(),
      home: this.options.home,
      cells: place.cells.map(namesOfCell).filter(Boolean),
    };
    const key = JSON.stringify(question);
    const kept = this.cache.get(key);
    if (kept) return kept;
    const answer = await this.ask(question);
    if (!answer.findings.some((f) => f.kind === 'unscanned')) this.keep(key, answer);
    return answer;
  }

  private keep(key: string, answer: Answer): void {
    this.cache.set(key, answer);
    this.cachedChars += key.length;
    for (const [old] of this.cache) {
      if (this.cachedChars <= CACHED_CHARS) break;
      this.cache.delete(old);
      this.cachedChars -= old.length;
    }
  }

  private ask(question: object): Promise<Answer> {
    return new Promise((resolve) => {
      const child = this.process();
      if (!child) return resolve(unscanned('its Python could not be started'));
      const id = this.nextId++;
      const timer = setTimeout(() => {
        this.options.log.warn(`the risk scan gave no answer within ${ANSWER_MS / 1000} s; its process is restarted`);
        this.stop(child, 'it gave no answer in time');
      }, ANSWER_MS);
      this.pending.set(id, { resolve, timer });
      child.stdin.write(`${JSON.stringify({ id, ...question })}\n`);
    });
  }

  /** The running process, started when there is none (or the Python or the sandbox setting changed). */
  private process(): ScanProcess | undefined {
    const python = this.options.python();
    const startAs = JSON.stringify([python, this.options.sandboxed?.() ?? false]);
    if (this.child && this.startedAs === startAs) return this.child;
    if (this.child) this.stop(this.child, 'its Python or its sandbox changed');
    const argv = [python, '-I', '-S', this.options.script];
    let child: ScanProcess;
    try {
      const command = this.options.wrap?.(argv, process.env) ?? { command: python, args: argv.slice(1) };
      child = spawnCommand(command, { stdio: ['pipe', 'pipe', 'pipe'], env: process.env }) as ScanProcess;
    } catch (error) {
      this.options.log.warn(`the risk scan could not start ${python}: ${errorMessage(error)}`);
      return undefined;
    }
    this.child = child;
    this.startedAs = startAs;
    const decoder = new StringDecoder('utf8');
    let buffered = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += decoder.write(chunk);
      let end;
      while ((end = buffered.indexOf('\n')) >= 0) {
        this.answered(buffered.slice(0, end));
        buffered = buffered.slice(end + 1);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
    child.stdin.on('error', () => undefined);
    child.on('error', (error) => {
      this.options.log.warn(`the risk scan could not start ${python}: ${error.message}`);
      this.stop(child, `its Python could not be started (${error.message})`);
    });
    child.on('exit', (code, signal) => {
      if (this.child !== child) return;
      this.options.log.warn(`the risk scan's process ended (${signal ?? `exit code ${code}`}): ${stderr.trim()}`);
      this.stop(child, 'its process ended');
    });
    return child;
  }

  private answered(line: string): void {
    let answer: { id?: number; findings?: RiskFinding[]; omitted?: number; failed?: string };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      return;
    }
    const waiting = answer.id === undefined ? undefined : this.pending.get(answer.id);
    if (!waiting) return;
    this.pending.delete(answer.id!);
    clearTimeout(waiting.timer);
    if (answer.failed !== undefined || !Array.isArray(answer.findings)) {
      this.options.log.warn(`the risk scan failed: ${answer.failed ?? line.slice(0, 200)}`);
      waiting.resolve(unscanned(`it failed (${answer.failed ?? 'no findings in its answer'})`));
    } else waiting.resolve({ findings: answer.findings, ...(answer.omitted && { omitted: answer.omitted }) });
  }

  /** Ends `child`; every question still waiting on it is answered as unscanned. */
  private stop(child: ScanProcess, why: string): void {
    if (this.child === child) this.child = undefined;
    child.kill();
    for (const [id, waiting] of this.pending) {
      clearTimeout(waiting.timer);
      waiting.resolve(unscanned(why));
      this.pending.delete(id);
    }
  }

  dispose(): void {
    if (this.child) this.stop(this.child, 'the bridge stopped');
  }
}

/** A scan that could not be made: a high finding, so the `ask-risky` mode asks rather than lets it through. */
function unscanned(why: string): Answer {
  return {
    findings: [
      {
        tier: 'high',
        kind: 'unscanned',
        pattern: 'risk scan',
        line: 1,
        reason: `the risk scan could not read this code: ${why}`,
      },
    ],
  };
}
