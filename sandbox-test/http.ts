/**
 * A small HTTP client for the checks, on node:http so every header (Host and Origin included) and
 * every byte is under the check's control: JSON requests with token/Host/Origin overrides, and an
 * SSE reader that keeps the raw bytes and the parsed events, with arrival times, and can
 * disconnect mid-stream.
 */
import * as http from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { createParser } from 'eventsource-parser';

export interface RequestOptions {
  method?: string;
  /** Path and query, e.g. `/api/sessions?access_token=x`. */
  path: string;
  /** Bearer token; undefined: the client's token; null: send no Authorization header. */
  token?: string | null;
  /** Host header (default `127.0.0.1:<port>`). */
  host?: string;
  /** Origin header (default: none). */
  origin?: string;
  /** Extra headers; a value of undefined removes a default. */
  headers?: Record<string, string | undefined>;
  /** JSON body (sets Content-Type: application/json unless contentType is given). */
  json?: unknown;
  /** Raw body. */
  body?: string | Buffer;
  contentType?: string;
  /** Whole-request timeout (default 10 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface HttpResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  rawBytes: Buffer;
  text: string;
  /** Parsed JSON body; throws a one-line error when the body is not JSON. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- arbitrary JSON, asserted on by the checks
  json<T = any>(): T;
}

/** One SSE event as received: its name, parsed data, the raw data line, and arrival time. */
export interface SseEvent {
  event: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- arbitrary JSON, asserted on by the checks
  data: any;
  rawData: string;
  /** ms since the request was sent. */
  at: number;
  /** Arrival time, epoch ms (to compare events of different streams). */
  time: number;
}

export interface SseResult {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Every byte of the body, decoded as UTF-8. */
  raw: string;
  rawBytes: Buffer;
  events: SseEvent[];
  /** Events that are not exactly `event: X\ndata: <json>` (comments, id:, retry:, CR, bad JSON...). */
  framingErrors: string[];
  /** The bridge's `: running N s` comments (a silent run's heartbeat), when they came: ms since the request. */
  heartbeats: { text: string; at: number }[];
  /** Bytes after the last `\n\n` when the stream ended (should be empty). */
  trailing: string;
  /** How the stream ended: the server closed it, we disconnected, or an error. */
  ended: 'closed' | 'disconnected' | 'error';
  error?: string;
  /** ms from request to end of stream. */
  durationMs: number;
  /** When the request was sent and when the stream ended, epoch ms. */
  startedAt: number;
  endedAt: number;
  /** Convenience views. */
  stdout: string;
  stderr: string;
  done: SseEvent | undefined;
}

/** Every response any client saw, for checks over all traffic (e.g. no CORS headers anywhere). */
export const responseLog: { method: string; path: string; status: number; headers: http.IncomingHttpHeaders }[] = [];

const oneLine = (s: string, max = 200) => s.replace(/\s+/g, ' ').slice(0, max);

export class BridgeClient {
  readonly port: number;
  readonly hostname: string;

  constructor(
    readonly baseUrl: string,
    readonly token: string | null,
  ) {
    const url = new URL(baseUrl);
    this.hostname = url.hostname.replace(/^\[|\]$/g, '');
    this.port = Number(url.port);
  }

  /** The same bridge with another token (null: none). */
  withToken(token: string | null): BridgeClient {
    return new BridgeClient(this.baseUrl, token);
  }

  private buildRequest(opts: RequestOptions): { options: http.RequestOptions; body: Buffer | undefined } {
    // The harness names itself as any HTTP client does (its activity then has no unnamed client).
    const headers: Record<string, string> = {
      host: opts.host ?? `${this.hostname}:${this.port}`,
      'user-agent': 'agent-bridge-harness',
    };
    const token = opts.token === undefined ? this.token : opts.token;
    if (token) headers['authorization'] = `Bearer ${token}`;
    if (opts.origin !== undefined) headers['origin'] = opts.origin;
    let body: Buffer | undefined;
    if (opts.json !== undefined) {
      body = Buffer.from(JSON.stringify(opts.json), 'utf8');
      headers['content-type'] = opts.contentType ?? 'application/json';
    } else if (opts.body !== undefined) {
      body = Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(opts.body, 'utf8');
      if (opts.contentType) headers['content-type'] = opts.contentType;
    } else if (opts.contentType) headers['content-type'] = opts.contentType;
    if (body) headers['content-length'] = String(body.length);
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (v === undefined) delete headers[k.toLowerCase()];
      else headers[k.toLowerCase()] = v;
    }
    return {
      options: {
        host: this.hostname,
        port: this.port,
        method: opts.method ?? (body ? 'POST' : 'GET'),
        path: opts.path,
        headers,
        agent: false, // a fresh connection per request: no pooling surprises across checks
        setHost: false,
      },
      body,
    };
  }

  /** One request; resolves with the whole response. Rejects on timeout or connection errors. */
  request(opts: RequestOptions): Promise<HttpResult> {
    const { options, body } = this.buildRequest(opts);
    const timeoutMs = opts.timeoutMs ?? 10_000;
    return new Promise<HttpResult>((resolve, reject) => {
      let settled = false;
      const finish = (err: Error | undefined, result?: HttpResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(result!);
      };
      const req = http.request(options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const rawBytes = Buffer.concat(chunks);
          const text = rawBytes.toString('utf8');
          responseLog.push({ method: options.method!, path: opts.path, status: res.statusCode ?? 0, headers: res.headers });
          finish(undefined, {
            status: res.statusCode ?? 0,
            headers: res.headers,
            rawBytes,
            text,
            json<T>() {
              try {
                return JSON.parse(text) as T;
              } catch {
                throw new Error(
                  `${options.method} ${opts.path}: body is not JSON (status ${res.statusCode}): ${oneLine(text) || '(empty)'}`,
                );
              }
            },
          });
        });
        res.on('error', (e) => finish(e));
      });
      const onAbort = () => req.destroy(new Error('aborted'));
      opts.signal?.addEventListener('abort', onAbort);
      const timer = setTimeout(
        () => req.destroy(new Error(`${options.method} ${opts.path}: no response within ${timeoutMs} ms`)),
        timeoutMs,
      );
      // A server may answer (413) and close before the body is fully written: keep its answer.
      req.on('error', (e) => {
        if (!settled && (e as NodeJS.ErrnoException).code !== 'EPIPE' && (e as NodeJS.ErrnoException).code !== 'ECONNRESET')
          finish(e);
        else if (!settled)
          setTimeout(
            () => finish(new Error(`${options.method} ${opts.path}: connection closed without a response (${e.message})`)),
            2000,
          );
      });
      if (body) req.write(body);
      req.end();
    });
  }

  get(path: string, opts: Omit<RequestOptions, 'path'> = {}): Promise<HttpResult> {
    return this.request({ ...opts, method: 'GET', path });
  }

  post(path: string, json: unknown, opts: Omit<RequestOptions, 'path' | 'json'> = {}): Promise<HttpResult> {
    return this.request({ ...opts, method: 'POST', path, json });
  }

  /** Opens a streamed request; see SseStream. */
  stream(opts: RequestOptions): SseStream {
    const { options, body } = this.buildRequest(opts);
    return new SseStream(options, body, opts);
  }

  /** POST /api/kernel/execute as marimo's clients send it; the returned stream is live. */
  execute(sessionId: string | undefined, code: string, opts: Omit<RequestOptions, 'path' | 'json'> = {}): SseStream {
    const headers = { ...(sessionId !== undefined ? { 'marimo-session-id': sessionId } : {}), ...opts.headers };
    return this.stream({ ...opts, method: 'POST', path: '/api/kernel/execute', json: { code }, headers });
  }

  /** Runs code and waits for the end of the stream. */
  run(sessionId: string, code: string, opts: Omit<RequestOptions, 'path' | 'json'> = {}): Promise<SseResult> {
    return this.execute(sessionId, code, opts).result;
  }
}

/**
 * A live SSE response. `events` fills as blocks arrive; `result` resolves when the stream ends
 * (server closed, `disconnect()`, error or timeout: a stream without a `done` after `timeoutMs`
 * is disconnected and resolves with ended = 'disconnected' and error set).
 */
export class SseStream {
  readonly events: SseEvent[] = [];
  readonly framingErrors: string[] = [];
  readonly heartbeats: { text: string; at: number }[] = [];
  readonly result: Promise<SseResult>;
  /** Resolves with status and headers as soon as the response starts. */
  readonly response: Promise<{ status: number; headers: http.IncomingHttpHeaders }>;
  private readonly chunks: Buffer[] = [];
  private text = '';
  private readonly t0 = Date.now();
  private req!: http.ClientRequest;
  private disconnected = false;
  private listeners: (() => void)[] = [];

  constructor(options: http.RequestOptions, body: Buffer | undefined, opts: RequestOptions) {
    const timeoutMs = opts.timeoutMs ?? 10_000;
    let resolveResponse!: (v: { status: number; headers: http.IncomingHttpHeaders }) => void;
    let rejectResponse!: (e: Error) => void;
    this.response = new Promise((res, rej) => {
      resolveResponse = res;
      rejectResponse = rej;
    });
    this.response.catch(() => undefined);
    this.result = new Promise<SseResult>((resolve) => {
      let status = 0;
      let headers: http.IncomingHttpHeaders = {};
      let settled = false;
      const decoder = new StringDecoder('utf8');
      const finish = (ended: SseResult['ended'], error?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.feed(decoder.end());
        rejectResponse(new Error(error ?? 'no response'));
        const stdout = this.events
          .filter((e) => e.event === 'stdout')
          .map((e) => String(e.data?.data ?? ''))
          .join('');
        const stderr = this.events
          .filter((e) => e.event === 'stderr')
          .map((e) => String(e.data?.data ?? ''))
          .join('');
        responseLog.push({ method: options.method!, path: opts.path, status, headers });
        resolve({
          status,
          headers,
          raw: this.text,
          rawBytes: Buffer.concat(this.chunks),
          events: this.events,
          framingErrors: this.framingErrors,
          heartbeats: this.heartbeats,
          trailing: this.trailing,
          ended,
          error,
          durationMs: Date.now() - this.t0,
          startedAt: this.t0,
          endedAt: Date.now(),
          stdout,
          stderr,
          done: this.events.find((e) => e.event === 'done'),
        });
        this.notify();
      };
      this.req = http.request(options, (res) => {
        status = res.statusCode ?? 0;
        headers = res.headers;
        resolveResponse({ status, headers });
        res.on('data', (c: Buffer) => {
          this.chunks.push(c);
          this.feed(decoder.write(c));
          this.notify();
        });
        res.on('end', () => finish(this.disconnected ? 'disconnected' : 'closed'));
        res.on('close', () => finish(this.disconnected ? 'disconnected' : 'closed'));
        res.on('error', (e) => finish(this.disconnected ? 'disconnected' : 'error', e.message));
      });
      this.req.on('error', (e) => finish(this.disconnected ? 'disconnected' : 'error', e.message));
      const timer = setTimeout(() => {
        this.disconnect();
        finish('disconnected', `stream not finished within ${timeoutMs} ms`);
      }, timeoutMs);
      opts.signal?.addEventListener('abort', () => this.disconnect());
      if (body) this.req.write(body);
      this.req.end();
    });
  }

  /**
   * Parses events as their bytes arrive (eventsource-parser), then holds each to marimo's framing:
   * an event name and one line of JSON data, nothing else (no id, retry, comment or CR), but the
   * bridge's heartbeat comment (`: running 5 s`), which is kept apart.
   */
  private readonly parser = createParser({
    onEvent: ({ event, id, data }) => {
      const now = Date.now();
      let parsed: unknown;
      if (event === undefined || id !== undefined || data.includes('\n'))
        this.framingErrors.push(`bad block: ${JSON.stringify({ event, id, data: data.slice(0, 120) })}`);
      try {
        parsed = JSON.parse(data);
      } catch {
        this.framingErrors.push(`data is not JSON: ${JSON.stringify(data.slice(0, 120))}`);
      }
      this.events.push({ event: event ?? 'message', data: parsed, rawData: data, at: now - this.t0, time: now });
    },
    onComment: (c) => {
      if (/^ ?running \d+ s$/.test(c)) this.heartbeats.push({ text: c.trim(), at: Date.now() - this.t0 });
      else this.framingErrors.push(`comment: ${JSON.stringify(c.slice(0, 120))}`);
    },
    onRetry: (r) => this.framingErrors.push(`retry: ${r}`),
    onError: (e) => this.framingErrors.push(`${e.type}: ${JSON.stringify((e.line ?? e.message).slice(0, 120))}`),
  });

  private feed(text: string): void {
    if (text.includes('\r')) this.framingErrors.push('CR in the stream');
    this.text += text;
    this.parser.feed(text);
  }

  /** Bytes after the last event's blank line (should be none). */
  private get trailing(): string {
    const end = this.text.lastIndexOf('\n\n');
    return end < 0 ? this.text : this.text.slice(end + 2);
  }

  private notify(): void {
    const ls = this.listeners;
    this.listeners = [];
    for (const l of ls) l();
  }

  /** Waits until an event matching `pred` has arrived (resolves with it) or the stream ends (undefined). */
  async next(pred: (e: SseEvent) => boolean, timeoutMs = 10_000): Promise<SseEvent | undefined> {
    const end = Date.now() + timeoutMs;
    let ended = false;
    void this.result.then(() => (ended = true));
    for (;;) {
      const hit = this.events.find(pred);
      if (hit) return hit;
      if (ended) return undefined;
      const left = end - Date.now();
      if (left <= 0) throw new Error(`no matching SSE event within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.listeners.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Drops the connection, as a client that goes away mid-run would. */
  disconnect(): void {
    this.disconnected = true;
    this.req.destroy();
  }
}
