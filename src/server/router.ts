import { BridgeError } from '../core/errors';

export type Method = 'get' | 'post' | 'patch' | 'delete';

/** A 405: the answer carries `Allow` with the methods the path does take. */
export class MethodNotAllowed extends BridgeError {
  constructor(
    readonly allow: readonly string[],
    detail: string,
  ) {
    super(405, detail);
  }
}

/** What a router finds for a request: the row and its decoded `:params`. */
export interface Match<R> {
  row: R;
  params: Record<string, string>;
}

interface Compiled<R> {
  row: R;
  /** Literal segments, with null where a `:param` goes. */
  segments: (string | null)[];
  names: string[];
}

/**
 * Matches `METHOD /a/:b/c` patterns segment by segment, exactly (no trailing-slash or case
 * folding: clients call the paths as written); a literal row wins over a pattern that also
 * fits. A path that exists under another method is a 405 with an Allow header, not a 404; HEAD
 * is answered by the GET row.
 */
export class Router<R extends { method: Method; path: string }> {
  private readonly rows: Compiled<R>[];
  /** Rows without params by `method path`: most requests are found in one lookup. */
  private readonly literal = new Map<string, R>();

  constructor(rows: readonly R[]) {
    for (const row of rows) if (!row.path.includes('/:')) this.literal.set(`${row.method} ${row.path}`, row);
    this.rows = rows.map((row) => {
      const parts = row.path.split('/').slice(1);
      return {
        row,
        segments: parts.map((p) => (p.startsWith(':') ? null : p)),
        names: parts.filter((p) => p.startsWith(':')).map((p) => p.slice(1)),
      };
    });
  }

  /** The row for `method path`; throws the 404 or 405 the client should get otherwise. */
  match(method: string, path: string): Match<R> {
    const wanted = method === 'HEAD' ? 'get' : method.toLowerCase();
    const row = this.literal.get(`${wanted} ${path}`);
    if (row) return { row, params: {} };
    const parts = path.split('/').slice(1);
    const allowed: string[] = [];
    for (const c of this.rows) {
      const values = matchSegments(c.segments, parts);
      if (!values) continue;
      if (c.row.method !== wanted) {
        allowed.push(c.row.method.toUpperCase());
        continue;
      }
      const params: Record<string, string> = {};
      c.names.forEach((name, i) => (params[name] = decodeSegment(values[i]!)));
      return { row: c.row, params };
    }
    if (allowed.length) throw new MethodNotAllowed(allowed, `${method} ${path} is not supported: use ${allowed.join(' or ')}`);
    throw new BridgeError(404, `No route ${method} ${path}`);
  }
}

/** The raw values of the `:param` segments, or null when the path does not fit the pattern. */
function matchSegments(segments: readonly (string | null)[], parts: readonly string[]): string[] | null {
  if (segments.length !== parts.length) return null;
  const values: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const literal = segments[i];
    const part = parts[i]!;
    if (literal === null) {
      if (!part) return null;
      values.push(part);
    } else if (literal !== part) return null;
  }
  return values;
}

function decodeSegment(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new BridgeError(400, `Malformed percent-encoding in the path segment '${value}'`);
  }
}
