import { readFileSync } from 'node:fs';
import type { Checkpoint, CheckpointFile } from '../core/cells/checkpoints';
import type { Log } from '../core/log';
import { writeFileAtomic } from '../fsAtomic';

const WRITE_DELAY_MS = 200;

/**
 * The checkpoints in a JSON file of the extension's workspace storage, so a window reload still
 * offers them for review. Written shortly after a change (a burst of edits is one write; an
 * editor that stops within that delay loses the changes of it) or at once when asked (a batch
 * about to be applied in steps), and on dispose; written whole through a temporary file, so a
 * crash never leaves half a list.
 */
export class JsonCheckpointFile implements CheckpointFile {
  private latest: readonly Checkpoint[] | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly file: string,
    private readonly log: Log,
  ) {}

  load(): Checkpoint[] {
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.file, 'utf8'));
      return Array.isArray(parsed) ? (parsed as Checkpoint[]) : [];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
        this.log.warn(`agent changes to review: ${this.file} is unreadable, starting empty (${String(error)})`);
      return [];
    }
  }

  save(checkpoints: readonly Checkpoint[], now = false): void {
    this.latest = checkpoints;
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
      this.log.warn(`agent changes to review: cannot write ${this.file} (${String(error)})`);
    }
  }

  dispose(): void {
    this.flush();
  }
}
