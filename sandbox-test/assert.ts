/**
 * The checks' assertions: each throws a CheckFailure whose one-line message says what differed
 * (what mocha prints for a failed check), e.g. `GET /health status: expected 200, got 401`.
 */

/** Assertion failure with a one-line message. */
export class CheckFailure extends Error {
  override name = 'CheckFailure';
}

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
