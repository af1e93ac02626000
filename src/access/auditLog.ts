import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Log } from '../core/log';
import type { RiskReport } from '../core/model/riskScan';
import type { AgentAction } from '../core/agents/accessPolicy';
import type { Entry } from './record';
import { errorMessage } from '../core/errorMessage';

export const AUDIT_FILE = 'agent-activity.jsonl';
/** Past this size the file is rotated: .jsonl → .1.jsonl → .2.jsonl (then dropped). */
export const ROTATE_AT_BYTES = 5 * 1024 * 1024;
const KEPT_FILES = 2;
/** How long ended actions gather before their lines are written together. */
const BATCH_MS = 100;
/** How often the open file is checked for having been removed (it is then created again). */
const RECHECK_MS = 5_000;

/** One line of the audit log. */
export interface AuditRecord {
  time: string;
  /** Who, short ("bob (unverified)"); `about` says what that name is worth. */
  client: string;
  /** Absent in lines written by earlier versions. */
  about?: string;
  transport: AgentAction['transport'];
  notebook: string | null;
  notebookUri: string | null;
  kind: string;
  action: string;
  summary: string;
  code: string;
  sha256: string;
  durationMs: number;
  /** How it ended; `applying`: a batch about to be applied in steps (a line with its end follows, unless the editor stopped). */
  outcome: string;
  detail: string;
  /** Cells an edit created or changed: their index, text before and after. */
  cells: { index: number; before: string; after: string }[];
  /** What the risk scan found in the code it ran (absent: nothing). */
  risk?: RiskReport;
}

/** The files of the log, oldest first. */
export function auditFiles(dir: string): string[] {
  const rotated = Array.from({ length: KEPT_FILES }, (_, i) =>
    path.join(dir, AUDIT_FILE.replace('.jsonl', `.${KEPT_FILES - i}.jsonl`)),
  );
  return [...rotated, path.join(dir, AUDIT_FILE)];
}

/** An action to write: ended, or (`applying`) a batch about to be applied in steps. */
interface Queued {
  readonly entry: Entry;
  readonly applying?: string;
}

/**
 * Appends every ended action to a JSON Lines file, off the agent's path: lines are queued and
 * written together BATCH_MS later, through one handle kept open. Writing each action's line on
 * its own (creating the folder, opening, writing, closing) cost the extension host about 0.2 ms
 * per action, a third of a scratchpad run's own cost (SETUP.md, measured figures). The bridge's
 * token never reaches the file, even inside code an agent sent.
 */
export class AuditLog {
  private queue: Queued[] = [];
  /** Set while a batch gathers. */
  private timer: NodeJS.Timeout | undefined;
  /** Set while lines are written. */
  private writing: Promise<void> | undefined;
  private size: number | undefined;
  /** The file, open for appending; reopened after a rotation, when it was removed, or when a write failed. */
  private handle: fs.FileHandle | undefined;
  private checkedAt = 0;
  readonly file: string;

  constructor(
    private readonly dir: string,
    private readonly secret: () => string | null,
    private readonly log: Log,
    private readonly recheckMs = RECHECK_MS,
  ) {
    this.file = path.join(dir, AUDIT_FILE);
  }

  /** Queues an ended action; it is serialized, hashed and written with the others of its batch, off the agent's path. */
  append(entry: Entry): void {
    if (!entry.end) return;
    this.queue.push({ entry });
    this.timer ??= setTimeout(() => this.write(), BATCH_MS);
  }

  private write(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    // A drain under way writes what was queued meanwhile before it ends. Never a drain of nothing:
    // it would end before `writing` is set, leaving a settled promise there that flushed() awaits
    // forever (a microtask loop that froze the extension host).
    if (this.writing || !this.queue.length) return;
    this.writing = this.drain();
  }

  /**
   * Writes, before returning, that an action is about to apply a batch in steps (`what`), so an
   * editor stopped between two steps leaves a line of it; its usual line follows when it ends.
   */
  async applying(entry: Entry, what: string): Promise<void> {
    this.queue.push({ entry, applying: what });
    this.write();
    await this.flushed();
  }

  private line({ entry, applying }: Queued): string {
    const { action, end, notebook } = entry;
    const record: AuditRecord = {
      time: new Date(action.startedAt).toISOString(),
      client: action.client,
      about: action.about,
      transport: action.transport,
      notebook: action.notebook ?? null,
      notebookUri: notebook?.uri.toString() ?? null,
      kind: action.kind,
      action: action.label,
      summary: action.summary,
      code: action.code,
      sha256: createHash('sha256').update(action.code).digest('hex'),
      durationMs: applying === undefined ? Math.round(end!.durationMs) : 0,
      outcome: applying === undefined ? end!.outcome : 'applying',
      detail: applying ?? end!.detail,
      cells: applying === undefined ? entry.changes.map((c) => ({ index: c.cell.index, before: c.before, after: c.after })) : [],
      ...(applying === undefined && end!.risk && { risk: end!.risk }),
    };
    const line = JSON.stringify(record);
    const token = this.secret();
    return `${token && line.includes(token) ? line.split(token).join('[token]') : line}\n`;
  }

  /** Resolves when every line appended so far is on disk. */
  async flushed(): Promise<void> {
    if (this.timer) this.write();
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const chunk = this.queue.map((queued) => this.line(queued)).join('');
        this.queue = [];
        const bytes = Buffer.byteLength(chunk);
        let handle = await this.open();
        if (this.size! > 0 && this.size! + bytes > ROTATE_AT_BYTES) {
          await this.rotate();
          handle = await this.open();
        }
        try {
          await handle.appendFile(chunk);
        } catch (error) {
          await this.close();
          throw error;
        }
        this.size = (this.size ?? 0) + bytes;
      }
    } catch (error) {
      this.log.error(`could not write the agent audit log ${this.file}: ${errorMessage(error)}`);
    } finally {
      this.writing = undefined;
    }
  }

  private async open(): Promise<fs.FileHandle> {
    if (this.handle && Date.now() - this.checkedAt >= this.recheckMs) {
      this.checkedAt = Date.now();
      if ((await this.handle.stat()).nlink === 0) await this.close();
    }
    if (this.handle) return this.handle;
    this.checkedAt = Date.now();
    await fs.mkdir(this.dir, { recursive: true });
    const handle = await fs.open(this.file, 'a', 0o600);
    this.size = (await handle.stat()).size;
    return (this.handle = handle);
  }

  private async close(): Promise<void> {
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close().catch(() => undefined);
  }

  private async rotate(): Promise<void> {
    await this.close();
    const files = auditFiles(this.dir);
    for (let i = 0; i < files.length - 1; i++) await fs.rename(files[i + 1]!, files[i]!).catch(() => undefined);
    this.size = 0;
  }

  /**
   * Writes what is queued, then closes the file. The window may be closing: a batch that still
   * gathers is written at once, before this returns.
   */
  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.writing && this.queue.length) {
      try {
        mkdirSync(this.dir, { recursive: true });
        appendFileSync(this.file, this.queue.map((entry) => this.line(entry)).join(''), { mode: 0o600 });
      } catch (error) {
        this.log.error(`could not write the agent audit log ${this.file}: ${errorMessage(error)}`);
      }
      this.queue = [];
    }
    void this.flushed().then(() => this.close());
  }
}

/** Every record of the log, oldest first (unreadable lines skipped). */
export async function readAudit(dir: string): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  for (const file of auditFiles(dir)) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        records.push(JSON.parse(line) as AuditRecord);
      } catch {
        // a line cut by a crash mid-write
      }
    }
  }
  return records;
}
