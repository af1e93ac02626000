import type { Log } from '../core/log';
import { namesOfCell, type RiskFinding, type RiskScanner, type ScanPlace } from '../core/model/riskScan';
import type { KernelCommand } from './builtin/kernelCommand';
import { KeptProcess } from './keptProcess';

/** How long one question may take before the process is taken as stuck (a loaded machine is slow). */
const ANSWER_MS = 15_000;
/** Kept this long without a question: the scan is on every agent run's path, and a start costs one such run a Python start. */
const IDLE_MS = 10 * 60_000;
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
  /** The program as it starts: in the builtin kernel's sandbox while that is on, as the code check's (a change starts it again). */
  wrap?: (argv: readonly string[], env: NodeJS.ProcessEnv) => KernelCommand | undefined;
  log: Log;
}

/**
 * risk_scan.py in a process of its own, started on the first question and kept (keptProcess.ts): a kernel's state
 * cannot reach it (code run earlier cannot change how later code is read), and no Python starts
 * per run. `-I -S`: no user site, no PYTHON* variables, no site-packages and their `.pth` files.
 * While agentBridge.kernel.sandbox is on it runs in the kernel's sandbox, as the code check does
 * (its Python is the kernel's, whose files a sandboxed run may have changed).
 * Questions go one a line, answers come back in turn; answers are kept by their question (the
 * same code in the same place reads the same). A scan that cannot be made is a finding
 * ("unscanned"), never a silent pass.
 */
export class PythonRiskScanner implements RiskScanner {
  private readonly process: KeptProcess;
  private readonly cache = new Map<string, Answer>();
  private cachedChars = 0;

  constructor(private readonly options: RiskScannerOptions) {
    this.process = new KeptProcess({
      what: 'the risk scan',
      command: () => {
        const argv = [options.python(), '-I', '-S', options.script];
        return options.wrap?.(argv, process.env) ?? { command: argv[0]!, args: argv.slice(1) };
      },
      answers: (line) => line.startsWith('{'),
      log: options.log,
      answerMs: ANSWER_MS,
      idleMs: IDLE_MS,
    });
  }

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
    const answer = this.answer(await this.process.ask(key));
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

  private answer(line: string | undefined): Answer {
    if (line === undefined) return unscanned('its process gave no answer (see the log)');
    let answer: { findings?: RiskFinding[]; omitted?: number; failed?: string };
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      return unscanned('its answer was not JSON');
    }
    if (answer.failed !== undefined || !Array.isArray(answer.findings)) {
      this.options.log.warn(`the risk scan failed: ${answer.failed ?? line.slice(0, 200)}`);
      return unscanned(`it failed (${answer.failed ?? 'no findings in its answer'})`);
    }
    return { findings: answer.findings, ...(answer.omitted && { omitted: answer.omitted }) };
  }

  dispose(): void {
    this.process.dispose();
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
