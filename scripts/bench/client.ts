/**
 * The benchmark's HTTP client: one keep-alive connection per client (as an agent's HTTP library
 * would hold), requests timed with performance.now(), and a lean SSE reader for
 * `POST /api/kernel/execute` that records when the headers, the first event and `done` arrived.
 * The harness's BridgeClient (sandbox-test/http.ts) opens a fresh connection per request and
 * keeps every byte, which is right for checks and wrong for timing.
 */
import * as http from 'node:http';
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

export class KeepAliveClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
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

  private options(
    method: string,
    path: string,
    body: Buffer | undefined,
    extra: Record<string, string> = {},
  ): http.RequestOptions {
    const headers: Record<string, string> = { ...extra };
    if (this.token) headers['authorization'] = `Bearer ${this.token}`;
    if (body) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(body.length);
    }
    return { host: this.host, port: this.port, method, path, headers, agent: this.agent };
  }

  /** A JSON request; resolves with the whole body and the time to its last byte. */
  request(method: string, path: string, json?: unknown, timeoutMs = 60_000): Promise<Timed> {
    const body = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      const req = http.request(this.options(method, path, body), (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), ms: performance.now() - t0 });
        });
        res.on('error', reject);
      });
      const timer = setTimeout(() => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      req.end(body);
    });
  }

  /** marimo's execute: posts the code and reads the event stream to its end. Never rejects. */
  execute(sessionId: string, code: string, opts: ExecOptions = {}): Promise<ExecResult> {
    const body = Buffer.from(JSON.stringify({ code }));
    const keep = opts.keepText ?? true;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise((resolve) => {
      const t0 = performance.now();
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
      let settled = false;
      const finish = (error?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        r.endMs = performance.now() - t0;
        if (error) r.error = error;
        resolve(r);
      };
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
      const req = http.request(this.options('POST', '/api/kernel/execute', body, { 'marimo-session-id': sessionId }), (res) => {
        r.status = res.statusCode ?? 0;
        r.headersMs = performance.now() - t0;
        res.on('data', (c: Buffer) => {
          const text = decoder.write(c);
          if (keep) r.raw += text;
          pending += text;
          let start = 0;
          for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n', start)) {
            onBlock(pending.slice(start, end));
            start = end + 2;
          }
          if (start) pending = pending.slice(start);
        });
        res.on('end', () => finish(pending ? `bytes after the last event: ${JSON.stringify(pending.slice(0, 80))}` : undefined));
        res.on('error', (e) => finish(e.message));
      });
      const timer = setTimeout(() => {
        req.destroy();
        finish(`no end of stream within ${timeoutMs} ms`);
      }, timeoutMs);
      req.on('error', (e) => finish(e.message));
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
