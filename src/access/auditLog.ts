import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { Log } from '../core/log';
import type { RiskReport } from '../core/riskScan';
import type { Entry } from './record';
import { errorMessage } from '../core/errorMessage';

export const AUDIT_FILE = 'agent-activity.jsonl';
/** Past this size the file is rotated: .jsonl → .1.jsonl → .2.jsonl (then dropped). */
export const ROTATE_AT_BYTES = 5 * 1024 * 1024;
const KEPT_FILES = 2;

/** One line of the audit log. */
export interface AuditRecord {
  time: string;
  /** Who, short ("bob (unverified)"); `about` says what that name is worth. */
  client: string;
  /** Absent in lines written by earlier versions. */
  about?: string;
  transport: 'http' | 'mcp';
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
 * written together on a later turn. The bridge's token never reaches the file, even inside code
 * an agent sent.
 */
export class AuditLog {
  private queue: Queued[] = [];
  private writing: Promise<void> | undefined;
  private size: number | undefined;
  readonly file: string;

  constructor(
    private readonly dir: string,
    private readonly secret: () => string | null,
    private readonly log: Log,
  ) {
    this.file = path.join(dir, AUDIT_FILE);
  }

  /** Queues an ended action; it is serialized, hashed and written on a later turn, off the agent's path. */
  append(entry: Entry): void {
    if (!entry.end) return;
    this.queue.push({ entry });
    this.writing ??= new Promise((resolve) => setImmediate(resolve)).then(() => this.drain());
  }

  /**
   * Writes, before returning, that an action is about to apply a batch in steps (`what`), so an
   * editor stopped between two steps leaves a line of it; its usual line follows when it ends.
   */
  async applying(entry: Entry, what: string): Promise<void> {
    this.queue.push({ entry, applying: what });
    this.writing ??= this.drain();
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
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const chunk = this.queue.map((queued) => this.line(queued)).join('');
        this.queue = [];
        await fs.mkdir(this.dir, { recursive: true });
        this.size ??= await fs.stat(this.file).then(
          (s) => s.size,
          () => 0,
        );
        if (this.size > 0 && this.size + Buffer.byteLength(chunk) > ROTATE_AT_BYTES) await this.rotate();
        await fs.appendFile(this.file, chunk, { mode: 0o600 });
        this.size += Buffer.byteLength(chunk);
      }
    } catch (error) {
      this.log.error(`could not write the agent audit log ${this.file}: ${errorMessage(error)}`);
    } finally {
      this.writing = undefined;
    }
  }

  private async rotate(): Promise<void> {
    const files = auditFiles(this.dir);
    for (let i = 0; i < files.length - 1; i++) await fs.rename(files[i + 1]!, files[i]!).catch(() => undefined);
    this.size = 0;
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
