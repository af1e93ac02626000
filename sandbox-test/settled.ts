/**
 * The values of the first `n` of `promises` to settle, in the order they did (a rejection's is
 * its reason), or of those settled when `timeoutMs` passed. Which requests of a flood a server
 * answers first is its own affair, not the order they were sent in.
 */
export function firstSettled<T>(promises: readonly Promise<T>[], n: number, timeoutMs: number): Promise<(T | unknown)[]> {
  return new Promise((resolve) => {
    const values: (T | unknown)[] = [];
    const timer = setTimeout(() => resolve([...values]), timeoutMs);
    const add = (value: T | unknown) => {
      values.push(value);
      if (values.length === n) {
        clearTimeout(timer);
        resolve([...values]);
      }
    };
    for (const p of promises) p.then(add, add);
  });
}
