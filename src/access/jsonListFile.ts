import { readFileSync } from 'node:fs';
import type { Log } from '../core/log';
import { writeFileAtomic } from '../fsAtomic';

const WRITE_DELAY_MS = 200;

/**
 * A list kept in a JSON file of the extension's workspace storage, so a window reload still has
 * it (the agent changes to review, the agent runs). Written shortly after a change (a burst of
 * changes is one write; an editor that stops within that delay loses the changes of it) or at
 * once when asked (a batch about to be applied in steps), and on dispose; written whole through a
 * temporary file (0600), so a crash never leaves half a list.
 */
export class JsonListFile<T> {
  private latest: readonly T[] | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly file: string,
    /** What the list holds, for the log: "agent changes to review". */
    private readonly what: string,
    private readonly log: Log,
  ) {}

  load(): T[] {
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.file, 'utf8'));
      return Array.isArray(parsed) ? (parsed as T[]) : [];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.warn(`${this.what}: ${this.file} is unreadable, starting empty (${String(error)})`);
      return [];
    }
  }

  save(list: readonly T[], now = false): void {
    this.latest = list;
    if (now) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), WRITE_DELAY_MS);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.latest) return;
    try {
      writeFileAtomic(this.file, JSON.stringify(this.latest));
      this.latest = undefined;
    } catch (error) {
      this.log.warn(`${this.what}: cannot write ${this.file} (${String(error)})`);
    }
  }

  dispose(): void {
    this.flush();
  }
}
