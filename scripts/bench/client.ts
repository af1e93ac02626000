/**
 * The benchmark's HTTP client: undici over one keep-alive connection per client, and
 * eventsource-parser for marimo's execute stream. Against the hand-written HTTP/1.1 client it
 * replaced, undici costs about 0.05 ms more per request on a 2-core VM (node:http's own client
 * about 0.07 ms more); every ratio and difference the bench prints has this same client on both
 * sides, so that cost cancels there and shows only in absolute figures.
 */
import { createParser } from 'eventsource-parser';
import { Client } from 'undici';
import { errorMessage } from '../../src/core/errorMessage';
import { CREDENTIAL_HEADER } from '../../src/core/agents/clients';

export interface Reply {
  status: number;
  text: string;
  /** ms from sending to the last byte. */
  ms: number;
}

export interface ExecResult {
  status: number;
  /** ms from sending to the `done` event; NaN when none came. */
  ms: number;
  stdout: string;
  stderr: string;
  /** `done`'s data. */
  done: { success?: boolean } | undefined;
  /** The whole body (for cross-talk checks). */
  raw: string;
  /** Transport or framing trouble; the run's own failure shows in `done`. */
  error?: string;
}

export class BenchClient {
  private readonly client: Client;
  private auth: Record<string, string>;

  /**
   * `name`: the client's name (X-Agent-Bridge-Client), which tells agents apart. `keepCredential`:
   * send back the credential the bridge answers with, as an agent does to see its own runs.
   */
  constructor(
    baseUrl: string,
    token: string | null,
    name?: string,
    private readonly keepCredential = false,
  ) {
    this.client = new Client(baseUrl, { pipelining: 1, keepAliveTimeout: 60_000 });
    this.auth = { ...(token && { authorization: `Bearer ${token}` }), ...(name && { 'x-agent-bridge-client': name }) };
  }

  private heard(headers: Record<string, string | string[] | undefined>): void {
    const credential = headers[CREDENTIAL_HEADER];
    if (this.keepCredential && typeof credential === 'string') this.auth = { ...this.auth, [CREDENTIAL_HEADER]: credential };
  }

  /** A JSON request (GET when `json` is undefined); resolves with the whole body. */
  async request(method: string, path: string, json?: unknown, timeoutMs = 60_000): Promise<Reply> {
    const start = performance.now();
    const res = await this.client.request({
      method: method as 'GET',
      path,
      headers: json === undefined ? this.auth : { ...this.auth, 'content-type': 'application/json' },
      body: json === undefined ? undefined : JSON.stringify(json),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    this.heard(res.headers);
    const text = await res.body.text();
    return { status: res.statusCode, text, ms: performance.now() - start };
  }

  /** marimo's `POST /api/kernel/execute`, read to the end of its event stream. Never rejects. */
  async execute(sessionId: string, code: string, timeoutMs = 60_000): Promise<ExecResult> {
    const r: ExecResult = { status: 0, ms: NaN, stdout: '', stderr: '', done: undefined, raw: '' };
    const start = performance.now();
    const parser = createParser({
      onEvent: ({ event, data }) => {
        const body = JSON.parse(data) as { data?: unknown; success?: boolean };
        if (event === 'done') {
          r.ms = performance.now() - start;
          r.done = body;
        } else if ((event === 'stdout' || event === 'stderr') && typeof body.data === 'string') r[event] += body.data;
        else r.error ??= `unexpected event ${event}: ${data.slice(0, 120)}`;
      },
      onError: (e) => (r.error ??= `framing: ${e.message}`),
    });
    try {
      const res = await this.client.request({
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...this.auth, 'content-type': 'application/json', 'marimo-session-id': sessionId },
        body: JSON.stringify({ code }),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      r.status = res.statusCode;
      this.heard(res.headers);
      const decoder = new TextDecoder();
      for await (const bytes of res.body as AsyncIterable<Uint8Array>) {
        const chunk = decoder.decode(bytes, { stream: true });
        r.raw += chunk;
        if (r.status === 200) parser.feed(chunk);
      }
      if (r.status !== 200) r.error ??= `status ${r.status}: ${r.raw.slice(0, 200)}`;
    } catch (e) {
      r.error ??= errorMessage(e);
    }
    return r;
  }

  close(): Promise<void> {
    return this.client.close();
  }

  /** Closes the connection now, requests in flight too. */
  destroy(): Promise<void> {
    return this.client.destroy();
  }
}
