/**
 * The benchmark's HTTP client: HTTP/1.1 over one keep-alive socket per client, spoken as curl
 * speaks it (one write per request, the response parsed as its bytes arrive), with a lean SSE
 * reader for `POST /api/kernel/execute` that records when the headers, the first event and
 * `done` arrived. Not node:http's client: measured against the same server in the same run, that
 * one spends about 0.3 ms of its own per request on a small VM (section 1 prints the figure),
 * which the benchmark would have counted as the bridge's. The harness's BridgeClient
 * (sandbox-test/http.ts) opens a fresh connection per request and keeps every byte, which is
 * right for checks and wrong for timing.
 */
import * as http from 'node:http';
import * as net from 'node:net';
import { StringDecoder } from 'node:string_decoder';

export interface Timed {
  status: number;
  body: Buffer;
  ms: number;
}

export interface ExecOptions {
  /** Keep the stdout/stderr text (off for the 10 MB stream: only its length is counted). */
  keepText?: boolean;
  timeoutMs?: number;
}

export interface ExecResult {
  status: number;
  /** ms from sending the request to the response headers (the bridge flushes them before the run). */
  headersMs: number;
  /** ms to the first event of any kind. */
  firstEventMs: number;
  /** ms to the `done` event; NaN when none came. */
  doneMs: number;
  /** ms to the end of the response. */
  endMs: number;
  events: number;
  stdoutChars: number;
  stderrChars: number;
  stdout: string;
  stderr: string;
  /** Whole body when keepText (for the cross-talk check). */
  raw: string;
  done: { success?: boolean; output?: { data?: string } } | undefined;
  framingErrors: number;
  error?: string;
}

interface ResponseHandlers {
  /** performance.now() just before the request's one write. */
  sent?(at: number): void;
  head(status: number, headers: ReadonlyMap<string, string>): void;
  body(bytes: Buffer): void;
  end(): void;
}

/**
 * Parses one HTTP/1.1 response as it arrives: status line and headers, then a body framed by
 * Content-Length or chunked encoding (the only two the bridge sends). Throws on anything else.
 */
export class ResponseParser {
  private pending: Buffer = Buffer.alloc(0);
  private stage: 'head' | 'size' | 'data' | 'crlf' | 'trailer' | 'done' = 'head';
  private chunked = false;
  private left = 0;
  headers: ReadonlyMap<string, string> = new Map();

  constructor(private readonly on: ResponseHandlers) {}

  get done(): boolean {
    return this.stage === 'done';
  }

  feed(data: Buffer): void {
    const buf = this.pending.length ? Buffer.concat([this.pending, data]) : data;
    let at = 0;
    for (;;) {
      if (this.stage === 'head') {
        const end = buf.indexOf('\r\n\r\n', at);
        if (end < 0) break;
        this.parseHead(buf.toString('latin1', at, end));
        at = end + 4;
      } else if (this.stage === 'size') {
        const end = buf.indexOf('\r\n', at);
        if (end < 0) break;
        const size = parseInt(buf.toString('latin1', at, end).split(';')[0]!, 16);
        if (!Number.isInteger(size) || size < 0)
          throw new Error(`bad chunk size line ${JSON.stringify(buf.toString('latin1', at, end))}`);
        at = end + 2;
        this.left = size;
        this.stage = size === 0 ? 'trailer' : 'data';
      } else if (this.stage === 'data') {
        const take = Math.min(this.left, buf.length - at);
        if (take > 0) this.on.body(buf.subarray(at, at + take));
        at += take;
        this.left -= take;
        if (this.left > 0) break;
        this.stage = this.chunked ? 'crlf' : 'done';
      } else if (this.stage === 'crlf') {
        if (buf.length - at < 2) break;
        if (buf[at] !== 13 || buf[at + 1] !== 10) throw new Error('chunk not followed by CRLF');
        at += 2;
        this.stage = 'size';
      } else if (this.stage === 'trailer') {
        const end = buf.indexOf('\r\n', at);
        if (end < 0) break;
        if (end === at) this.stage = 'done';
        at = end + 2;
      } else {
        if (at < buf.length) throw new Error(`${buf.length - at} bytes after the end of the response`);
        this.pending = Buffer.alloc(0);
        this.on.end();
        return;
      }
    }
    this.pending = buf.subarray(at);
  }

  private parseHead(text: string): void {
    const [statusLine = '', ...lines] = text.split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
    if (!status) throw new Error(`bad status line ${JSON.stringify(statusLine)}`);
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    this.headers = headers;
    this.on.head(Number(status[1]), headers);
    this.chunked = headers.get('transfer-encoding')?.toLowerCase() === 'chunked';
    const length = headers.get('content-length');
    if (this.chunked) this.stage = 'size';
    else if (length !== undefined && /^\d+$/.test(length)) {
      this.left = Number(length);
      this.stage = this.left > 0 ? 'data' : 'done';
    } else throw new Error('response has neither Content-Length nor a chunked body');
  }
}

interface Outgoing {
  method: string;
  path: string;
  body: Buffer | undefined;
  extra: Record<string, string>;
  timeoutMs: number;
  on: ResponseHandlers;
}

/** One request at a time per client, like a single connection; calls made meanwhile wait their turn. */
export class KeepAliveClient {
  private socket: net.Socket | undefined;
  private current: ResponseParser | undefined;
  private fail: ((error: Error) => void) | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly host: string;
  private readonly port: number;

  constructor(
    baseUrl: string,
    private readonly token: string | null,
  ) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
  }

  /** A JSON request; resolves with the whole body and the time to its last byte. */
  async request(method: string, path: string, json?: unknown, timeoutMs = 60_000): Promise<Timed> {
    const body = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
    const chunks: Buffer[] = [];
    let status = 0;
    let t0 = 0;
    let ms = 0;
    const on: ResponseHandlers = {
      sent: (at) => (t0 = at),
      head: (s) => (status = s),
      body: (b) => chunks.push(b),
      end: () => (ms = performance.now() - t0),
    };
    await this.exchange({ method, path, body, extra: {}, timeoutMs, on });
    return { status, body: Buffer.concat(chunks), ms };
  }

  /** marimo's execute: posts the code and reads the event stream to its end. Never rejects. */
  async execute(sessionId: string, code: string, opts: ExecOptions = {}): Promise<ExecResult> {
    const body = Buffer.from(JSON.stringify({ code }));
    const keep = opts.keepText ?? true;
    const r: ExecResult = {
      status: 0,
      headersMs: NaN,
      firstEventMs: NaN,
      doneMs: NaN,
      endMs: NaN,
      events: 0,
      stdoutChars: 0,
      stderrChars: 0,
      stdout: '',
      stderr: '',
      raw: '',
      done: undefined,
      framingErrors: 0,
    };
    let t0 = 0;
    let pending = '';
    const decoder = new StringDecoder('utf8');
    const onBlock = (block: string) => {
      r.events++;
      if (r.events === 1) r.firstEventMs = performance.now() - t0;
      const nl = block.indexOf('\n');
      if (!block.startsWith('event: ') || nl < 0 || !block.startsWith('data: ', nl + 1)) {
        r.framingErrors++;
        return;
      }
      const name = block.slice(7, nl);
      let data: { data?: unknown; success?: boolean };
      try {
        data = JSON.parse(block.slice(nl + 7)) as typeof data;
      } catch {
        r.framingErrors++;
        return;
      }
      if (name === 'done') {
        r.doneMs = performance.now() - t0;
        r.done = data;
      } else if (typeof data.data === 'string') {
        if (name === 'stdout') {
          r.stdoutChars += data.data.length;
          if (keep) r.stdout += data.data;
        } else {
          r.stderrChars += data.data.length;
          if (keep) r.stderr += data.data;
        }
      } else r.framingErrors++;
    };
    try {
      const on: ResponseHandlers = {
        sent: (at) => (t0 = at),
        head: (status) => {
          r.status = status;
          r.headersMs = performance.now() - t0;
        },
        body: (bytes) => {
          const text = decoder.write(bytes);
          if (keep) r.raw += text;
          pending += text;
          let start = 0;
          for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n', start)) {
            onBlock(pending.slice(start, end));
            start = end + 2;
          }
          if (start) pending = pending.slice(start);
        },
        end: () => (r.endMs = performance.now() - t0),
      };
      const extra = { 'Marimo-Session-Id': sessionId };
      await this.exchange({ method: 'POST', path: '/api/kernel/execute', body, extra, timeoutMs: opts.timeoutMs ?? 60_000, on });
      if (pending) r.error = `bytes after the last event: ${JSON.stringify(pending.slice(0, 80))}`;
    } catch (e) {
      r.error = e instanceof Error ? e.message : String(e);
      r.endMs = performance.now() - t0;
    }
    return r;
  }

  close(): void {
    this.socket?.destroy();
    this.socket = undefined;
  }

  /** Sends one request in one write, once the requests before it are answered; resolves when its response has ended. */
  private exchange(request: Outgoing): Promise<void> {
    const turn = this.queue.then(() => this.send(request));
    this.queue = turn.catch(() => {});
    return turn;
  }

  private send({ method, path, body, extra, timeoutMs, on }: Outgoing): Promise<void> {
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.host}:${this.port}\r\n`;
    if (this.token) head += `Authorization: Bearer ${this.token}\r\n`;
    for (const [name, value] of Object.entries(extra)) head += `${name}: ${value}\r\n`;
    if (body) head += `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`;
    const bytes = Buffer.from(`${head}\r\n`, 'latin1');
    return new Promise<void>((resolve, reject) => {
      const socket = this.connection();
      const timer = setTimeout(
        () => settle(new Error(`${method} ${path}: no end of response within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const settle = (error?: Error) => {
        clearTimeout(timer);
        this.current = this.fail = undefined;
        if (error || parser.headers.get('connection')?.toLowerCase() === 'close') this.close();
        if (error) reject(error);
        else resolve();
      };
      const parser = new ResponseParser({ ...on, end: () => (on.end(), settle()) });
      this.current = parser;
      this.fail = settle;
      on.sent?.(performance.now());
      socket.write(body ? Buffer.concat([bytes, body]) : bytes);
    });
  }

  private connection(): net.Socket {
    if (this.socket && !this.socket.destroyed) return this.socket;
    const socket = net.connect({ host: this.host, port: this.port, noDelay: true });
    socket.on('data', (data: Buffer) => {
      try {
        if (!this.current) throw new Error(`${data.length} bytes with no request waiting`);
        this.current.feed(data);
      } catch (e) {
        if (this.fail) this.fail(e instanceof Error ? e : new Error(String(e)));
        else socket.destroy();
      }
    });
    // Only the client's current socket speaks for its request: one it dropped is of no concern.
    const gone = (error?: Error) => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      this.fail?.(error ?? new Error('the server closed the connection before the response ended'));
    };
    socket.on('error', gone);
    socket.on('close', () => gone());
    this.socket = socket;
    return socket;
  }
}

/**
 * The same GET through node:http's own client over a keep-alive agent: beside the bench's client
 * on the same server, the difference is what node:http's client costs per request by itself.
 */
export function nodeHttpGet(agent: http.Agent, url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(performance.now() - t0));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}
