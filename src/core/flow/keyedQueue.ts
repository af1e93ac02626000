/**
 * Runs tasks one at a time per key (a notebook session), in arrival order; tasks for different
 * keys run concurrently. A task's failure does not block the ones queued behind it.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** True while a task of `key` is running or queued. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
