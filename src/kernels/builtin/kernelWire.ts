/**
 * The wire between the host and kernel.py: the messages each side sends, one JSON object per
 * line, UTF-8, and the framing that cuts the kernel's byte stream into bounded lines.
 *
 *   host -> kernel  {"op":"execute","id","code","mode":"cell"|"scratchpad"[,"cell":{"count"}]}
 *                   {"op":"reply","rid","result"} | {"op":"reply","rid","error"[,"interrupt":true]}
 *                   {"op":"inspect","qid","query"}   read state or code without a run (kernel_inspect.py)
 *                   {"op":"interrupt","id"}   then SIGINT: interrupt run `id` (or the run nested in it)
 *   kernel -> host  {"type":"ready","pid","python","ipython":str|null}   once, at start
 *                   {"type":"stream","id","name","text"}      id: the run that wrote it (null: none)
 *                   {"type":"display","id","data":{mime:str}[,"metadata"][,"execution_count"]}
 *                   {"type":"error","id","name","message","traceback"}
 *                   {"type":"done","id","success","value":{mime:str}|null[,"execution_count"][,"dataflow"]}   ends every run
 *                   {"type":"call","rid","id","method","params"}   run `id` blocks until our reply
 *                   {"type":"inspected","qid","result"}   answers an inspect, also while a run executes
 *
 * `cell.count` is the execution count of a cell run without IPython: its code is named `Cell In[count]`
 * in tracebacks, as IPython (which counts itself, and is sent none) names a cell. `ready.ipython` is
 * IPython's version when runs go through IPython's InteractiveShell (null: plain Python); a
 * display with `execution_count` is then a cell's value (Jupyter's execute_result) and a cell's
 * `done` carries its execution count. `metadata` is the display's Jupyter output metadata. A cell
 * run's `done` carries `dataflow` {reads, defines, mutates} when kernel_dataflow.py recorded it:
 * the globals the run read, bound (or rebound, or deleted) and changed in place.
 */
import type { MimeBundle, StreamName } from '../../core/model/kernelPort';

export type RunMode = 'cell' | 'scratchpad';

/** The notebook cell a run comes from (the host's messages about the run name it). */
export interface CellName {
  id: string;
}

/** Jupyter's output metadata of a display (e.g. an image's size). */
export type DisplayMetadata = Record<string, unknown>;

export type HostRequest =
  | { op: 'execute'; id: number; code: string; mode: RunMode; cell?: { count: number } }
  | { op: 'reply'; rid: number; result: unknown }
  | { op: 'reply'; rid: number; error: string; interrupt?: true; refused?: true }
  | { op: 'inspect'; qid: number; query: unknown }
  | { op: 'interrupt'; id: number };

export type KernelMessage =
  | { type: 'ready'; pid: number; python: string; ipython?: string | null }
  | { type: 'stream'; id: number | null; name: StreamName; text: string }
  | { type: 'display'; id: number | null; data: MimeBundle; metadata?: DisplayMetadata; execution_count?: number }
  | { type: 'error'; id: number | null; name: string; message: string; traceback: string }
  | { type: 'done'; id: number; success: boolean; value: MimeBundle | null; execution_count?: number; dataflow?: unknown }
  | { type: 'call'; rid: number; id: number | null; method: string; params: unknown }
  | { type: 'inspected'; qid: number; result: unknown };

/**
 * Largest message line the host accepts (bytes). kernel.py keeps its messages far below (stream
 * chunks of 1 M characters, values and tracebacks cut at 1 M, display items at 16 M), so only a
 * kernel bypassing those caps, e.g. code writing to the message fd, gets here.
 */
export const MAX_FRAME_BYTES = 64 << 20;

/** What can be read of a message too large to parse, from its first bytes. */
export interface OversizeFrame {
  readonly bytes: number;
  readonly type: string | undefined;
  /** The run it belongs to, when its head names one. */
  readonly id: number | undefined;
  /** For a `call`: the request to answer, else the kernel waits for ever. */
  readonly rid: number | undefined;
}

const HEAD_BYTES = 256;

/**
 * Splits a byte stream into lines of at most `maxBytes`. node:readline would fit the splitting
 * but keeps a line whole however long it grows (a 600 M-character message then ends in
 * "Invalid string length" and a wedged pipe), and cannot skip one; this keeps at most
 * `maxBytes`, drops the rest of an oversize line up to its newline (resync) and reports it.
 * Splitting bytes, not text, is safe: 0x0A never occurs inside a UTF-8 sequence.
 */
export class LineFramer {
  private parts: Buffer[] = [];
  private size = 0;
  /** Set while skipping an oversize line: its head and how many bytes it had so far. */
  private skipping: { head: Buffer; bytes: number } | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (frame: OversizeFrame) => void,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      if (this.skipping) this.skipping.bytes += end - start;
      else if (this.size + end - start > this.maxBytes) {
        const head = Buffer.concat([...this.parts, chunk.subarray(start, Math.min(end, start + HEAD_BYTES))]);
        this.skipping = { head: head.subarray(0, HEAD_BYTES), bytes: this.size + end - start };
        this.parts = [];
        this.size = 0;
      } else if (nl !== -1 && this.size === 0) {
        // The common case, a whole line inside one chunk: no copy.
        if (end > start) this.onLine(chunk.toString('utf8', start, end));
        start = nl + 1;
        continue;
      } else if (end > start) {
        this.parts.push(chunk.subarray(start, end));
        this.size += end - start;
      }
      if (nl === -1) return;
      this.endLine();
      start = nl + 1;
    }
  }

  private endLine(): void {
    if (this.skipping) {
      const { head, bytes } = this.skipping;
      this.skipping = undefined;
      this.onOversize(describeOversize(head.toString('utf8'), bytes));
      return;
    }
    const line = Buffer.concat(this.parts, this.size).toString('utf8');
    this.parts = [];
    this.size = 0;
    if (line) this.onLine(line);
  }
}

/** kernel.py writes "type" first and "id" (or "rid", "id" for calls) next: the head says whose it is. */
function describeOversize(head: string, bytes: number): OversizeFrame {
  const type = /^\{"type":"(\w+)"/.exec(head)?.[1];
  const id = /^\{"type":"\w+",(?:"rid":\d+,)?"id":(\d+)/.exec(head)?.[1];
  const rid = type === 'call' ? /^\{"type":"call","rid":(\d+)/.exec(head)?.[1] : undefined;
  return { bytes, type, id: id === undefined ? undefined : Number(id), rid: rid === undefined ? undefined : Number(rid) };
}
