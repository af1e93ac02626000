/**
 * A tiny check runner. Named checks run one at a time, each with its own timeout, and print
 *   PASS name (12 ms) | FAIL name — one-line reason | SKIP name — reason
 * `finish()` prints the wall time and a last line `N passed, N failed, N skipped`, and returns
 * the process exit code (non-zero on any failure).
 */

export interface CheckRun {
  /** Aborted when the check times out; pass it to requests so they stop too. */
  signal: AbortSignal;
  /** Extra detail printed under the result line (only on failure, or always with VERBOSE=1). */
  note(message: string): void;
}

export type CheckFn = (run: CheckRun) => void | Promise<void>;

interface Pending {
  name: string;
  fn?: CheckFn;
  skipReason?: string;
  timeoutMs: number;
}

export interface Outcome {
  name: string;
  status: 'pass' | 'fail' | 'skip';
  ms: number;
  reason?: string;
}

/** Assertion failure with a one-line message (what the FAIL line shows). */
export class CheckFailure extends Error {
  override name = 'CheckFailure';
}

const oneLine = (s: string, max = 400) => {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
};

/** Short, readable rendering of a value for failure messages. */
export function show(value: unknown, max = 160): string {
  let s: string;
  try {
    s = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    s = String(value);
  }
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

export function fail(message: string): never {
  throw new CheckFailure(message);
}

export function ok(condition: unknown, message: string): asserts condition {
  if (!condition) fail(message);
}

export function eq<T>(actual: T, expected: T, what: string): void {
  if (!Object.is(actual, expected)) fail(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

/** Structural equality (JSON-comparable values). */
export function deepEq(actual: unknown, expected: unknown, what: string): void {
  const canon = (v: unknown): string =>
    JSON.stringify(v, (_k, x: unknown) =>
      x && typeof x === 'object' && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x as object).sort(([a], [b]) => a.localeCompare(b)))
        : x,
    );
  if (canon(actual) !== canon(expected)) fail(`${what}: expected ${show(expected, 300)}, got ${show(actual, 300)}`);
}

export function match(actual: unknown, re: RegExp, what: string): void {
  if (typeof actual !== 'string' || !re.test(actual)) fail(`${what}: expected to match ${re}, got ${show(actual)}`);
}

export function includes(actual: unknown, part: string, what: string): void {
  if (typeof actual !== 'string' || !actual.includes(part))
    fail(`${what}: expected to contain ${show(part)}, got ${show(actual, 300)}`);
}

export class Harness {
  private readonly queue: Pending[] = [];
  private readonly names = new Set<string>();
  readonly outcomes: Outcome[] = [];
  private readonly t0 = Date.now();
  private readonly verbose = process.env['VERBOSE'] === '1';

  constructor(
    private readonly opts: {
      defaultTimeoutMs?: number;
      /** Only checks whose name contains this run; the others are reported SKIP. */
      only?: string;
      out?: (line: string) => void;
    } = {},
  ) {}

  private print(line: string): void {
    (this.opts.out ?? ((l: string) => process.stdout.write(`${l}\n`)))(line);
  }

  private add(p: Pending): void {
    if (this.names.has(p.name)) throw new Error(`duplicate check name: ${p.name}`);
    this.names.add(p.name);
    this.queue.push(p);
  }

  check(name: string, fn: CheckFn, options: { timeoutMs?: number } = {}): void {
    this.add({ name, fn, timeoutMs: options.timeoutMs ?? this.opts.defaultTimeoutMs ?? 15_000 });
  }

  skip(name: string, reason: string): void {
    this.add({ name, skipReason: reason, timeoutMs: 0 });
  }

  /** Records an outcome that did not come from a check function (e.g. setup failed). */
  record(name: string, status: Outcome['status'], reason?: string, ms = 0): void {
    for (let i = 2; this.names.has(name); i++) name = `${name.replace(/ #\d+$/, '')} #${i}`;
    this.names.add(name);
    this.report({ name, status, ms, reason });
  }

  private report(o: Outcome): void {
    this.outcomes.push(o);
    if (o.status === 'pass') this.print(`PASS ${o.name} (${o.ms} ms)`);
    else if (o.status === 'fail') this.print(`FAIL ${o.name} — ${o.reason}`);
    else this.print(`SKIP ${o.name} — ${o.reason}`);
  }

  /** Runs every queued check, in order. May be called again after more checks are queued. */
  async runPending(): Promise<void> {
    while (this.queue.length) {
      const p = this.queue.shift()!;
      if (p.skipReason !== undefined) {
        this.report({ name: p.name, status: 'skip', ms: 0, reason: p.skipReason });
        continue;
      }
      if (this.opts.only && !p.name.includes(this.opts.only)) {
        this.report({ name: p.name, status: 'skip', ms: 0, reason: `not selected by --only ${JSON.stringify(this.opts.only)}` });
        continue;
      }
      await this.runOne(p);
    }
  }

  private async runOne(p: Pending): Promise<void> {
    const controller = new AbortController();
    const notes: string[] = [];
    const start = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(() => p.fn!({ signal: controller.signal, note: (m) => notes.push(m) })),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            controller.abort();
            reject(new CheckFailure(`timed out after ${p.timeoutMs} ms`));
          }, p.timeoutMs);
        }),
      ]);
      this.report({ name: p.name, status: 'pass', ms: Date.now() - start });
      if (this.verbose) for (const n of notes) this.print(`    ${n}`);
    } catch (err) {
      const message =
        err instanceof CheckFailure ? err.message : err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      this.report({ name: p.name, status: 'fail', ms: Date.now() - start, reason: oneLine(message) });
      for (const n of notes) this.print(`    ${oneLine(n, 2000)}`);
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }

  counts(): { passed: number; failed: number; skipped: number } {
    const n = (s: Outcome['status']) => this.outcomes.filter((o) => o.status === s).length;
    return { passed: n('pass'), failed: n('fail'), skipped: n('skip') };
  }

  /** Prints wall time and the summary line; returns the exit code. */
  finish(): number {
    const { passed, failed, skipped } = this.counts();
    this.print(`total wall time ${((Date.now() - this.t0) / 1000).toFixed(1)} s`);
    this.print(`${passed} passed, ${failed} failed, ${skipped} skipped`);
    return failed > 0 ? 1 : 0;
  }
}
