/**
 * A conformance target (the real marimo server, the bridge with the builtin kernel, ...) and what
 * an agent can observe of it: a script's exit code, stdout and stderr; an HTTP answer's status,
 * content type and JSON; an event stream's event names and the text of each stream.
 */
import type { BridgeClient, HttpResult, SseResult } from '../http';
import type { ScriptResult } from '../checks/scripts';

export interface TargetNotebook {
  /** The session id to send as Marimo-Session-Id. */
  session: string;
  /** The notebook's absolute path, as /api/sessions gives it. */
  path: string;
}

export interface Target {
  /** `marimo`, `bridge`, ... */
  name: string;
  url: string;
  token: string;
  client: BridgeClient;
  analysis: TargetNotebook;
  other: TargetNotebook;
  /** The environment the scripts run in: HOME and XDG_STATE_HOME pointing at this target's registry, no token. */
  env: NodeJS.ProcessEnv;
  /** The XDG_STATE_HOME whose marimo/servers registry lists this target (discover-servers.sh reads it). */
  stateHome: string;
}

/** What an agent observes, before normalising. Each case fills the parts it exercises. */
export interface Observation {
  exit?: number | null;
  stdout?: string;
  stderr?: string;
  status?: number;
  contentType?: string;
  /** A JSON answer's body (compared by shape, see shapeOf). */
  json?: unknown;
  /** An event stream: names with repeats of one name merged (how output is cut may differ). */
  events?: string[];
  /** The `done` event's data. */
  done?: unknown;
  /** Anything else the case measures (a second run's answer, a count). */
  extra?: Record<string, unknown>;
}

export const observeScript = (r: ScriptResult): Observation => ({ exit: r.code, stdout: r.stdout, stderr: r.stderr });

/** A JSON (or other) answer: status, content type, and the body parsed when it is JSON. */
export function observeHttp(r: HttpResult): Observation {
  let json: unknown;
  try {
    json = JSON.parse(r.text);
  } catch {
    json = r.text === '' ? '(empty)' : '(not JSON)';
  }
  return { status: r.status, contentType: mediaType(r.headers['content-type']), json };
}

/** An execute answer: a stream (events, texts, done) or, when refused, its JSON. */
export function observeStream(r: SseResult): Observation {
  const type = mediaType(r.headers['content-type']);
  if (type !== 'text/event-stream') {
    let json: unknown;
    try {
      json = JSON.parse(r.raw);
    } catch {
      json = '(not JSON)';
    }
    return { status: r.status, contentType: type, json };
  }
  const events: string[] = [];
  for (const e of r.events) if (events[events.length - 1] !== e.event) events.push(e.event);
  return { status: r.status, contentType: type, events, stdout: r.stdout, stderr: r.stderr, done: r.done?.data };
}

const mediaType = (header: string | string[] | undefined) => String(header ?? '').split(';')[0]!.trim();
