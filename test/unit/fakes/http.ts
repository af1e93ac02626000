import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A raw HTTP request whose Host, Origin and body bytes the test fully controls. */
export function request(
  port: number,
  options: {
    method?: string;
    path: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    abortAfterMs?: number;
    /** Aborting it drops the request, as a client that goes away. */
    signal?: AbortSignal;
  },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: { host: `127.0.0.1:${port}`, ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    if (options.abortAfterMs !== undefined) setTimeout(() => req.destroy(), options.abortAfterMs);
    options.signal?.addEventListener('abort', () => req.destroy());
    req.end(options.body);
  });
}

/** A JSON request to the test server with the test token: its status and parsed body. */
export async function jsonRequest(
  port: number,
  token: string,
  method: string,
  path: string,
  body?: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test bodies are read loosely
): Promise<{ status: number; body: any }> {
  const res = await request(port, {
    method,
    path,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: JSON.parse(res.body) };
}

/** A scratchpad run of `code` in session s_aaaaaa, as the client "tester" with the test token: its whole SSE answer. */
export function executeAsTester(
  port: number,
  code: string,
  options: { token: string; headers?: Record<string, string>; body?: object; abortAfterMs?: number },
): Promise<RawResponse> {
  return request(port, {
    method: 'POST',
    path: '/api/kernel/execute',
    headers: {
      authorization: `Bearer ${options.token}`,
      'content-type': 'application/json',
      'marimo-session-id': 's_aaaaaa',
      'x-agent-bridge-client': 'tester',
      ...options.headers,
    },
    body: JSON.stringify({ code, ...options.body }),
    ...(options.abortAfterMs !== undefined && { abortAfterMs: options.abortAfterMs }),
  });
}
