import { createHash } from 'node:crypto';
import type { Reader } from '../model/versions';
import { randomToken } from '../ids';

/**
 * Who an agent action comes from. Any client can send any name (an agent-name header, MCP's
 * `clientInfo`, a User-Agent), so a name is only ever a claim, and unlocks nothing. What tells
 * clients apart is a credential the bridge minted and handed to one client: an MCP session id
 * returned once the SDK accepted `initialize`, or, over plain HTTP, the credential returned with
 * the answer to a client's first write. Grants, "my changes" and undo bind to it, and the changes
 * an agent makes are kept under a hash of it and this window's run id, which no client of a later
 * window can match.
 */

/** Request header an HTTP agent names itself with (the configurations the bridge writes set it). */
export const CLIENT_HEADER = 'x-agent-bridge-client';
/** Request and response header carrying a credential the bridge minted for one HTTP client. */
export const CREDENTIAL_HEADER = 'x-agent-bridge-credential';
/** MCP's session header: the bridge mints one per accepted `initialize` and links later calls through it. */
export const MCP_SESSION_HEADER = 'mcp-session-id';

/** Most MCP sessions one client (by the name it gives) may start per minute; beyond, 429. */
export const SESSIONS_PER_MINUTE = 30;
const MINUTE_MS = 60_000;
/** Characters of a name the person's views show; the whole name is in the long form. */
const SHORT_NAME_CHARS = 24;

/** Who a request is, as the access policy and the activity record see it. */
export interface Caller {
  /** Short, for the person's views and prompts: "bob (unverified)", or "bob ✓" for a client the person approved. */
  readonly client: string;
  /** The long form, for hovers and the audit log: what the name is worth and what the client holds. */
  readonly about: string;
  /** The name the client gave (header, clientInfo, else User-Agent); undefined: none at all. */
  readonly claim: string | undefined;
  /** The bridge-minted credential this request carried, known to the bridge; undefined: none. */
  readonly credential: string | undefined;
  /** Whose changes are this caller's: a hash of its credential and this window's run id; undefined: none. */
  readonly owner: string | undefined;
}

type Headers = Readonly<Record<string, string | string[] | undefined>>;
const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** A name as a client gives it: one printable line, short; undefined when there is nothing printable. */
export function cleanName(name: string | undefined): string | undefined {
  const text = name?.replace(/[^\x20-\x7e]/g, '').trim();
  return text ? text.slice(0, 80) : undefined;
}

/** The name a request gives: the agent-name header, else its User-Agent (`curl/8.5.0`). */
export function claimOf(headers: Headers): string | undefined {
  return cleanName(first(headers[CLIENT_HEADER])) ?? cleanName(first(headers['user-agent']));
}

interface Known {
  /** Its number in this window, in the order credentials were minted. */
  readonly n: number;
  readonly claim: string | undefined;
  readonly owner: string;
  readonly via: 'http' | 'mcp';
  /** End of the person's "Allow for 10 Minutes" (epoch ms). */
  grantUntil?: number;
  /** When the person first allowed it for 10 minutes: it shows as approved from then on. */
  approvedAt?: number;
}

const clock = (at: number) => new Date(at).toLocaleTimeString([], { hour12: false });

/**
 * The credentials minted in this window, each with the claim of the client it went to and its
 * grant. Bounded: past `capacity`, the least recently used goes, but never one with a live grant
 * or whose changes are still kept (`ownsChanges`), so a flood of new clients evicts nobody who
 * matters. Starting MCP sessions is bounded per client and minute.
 */
export class ClientRegistry {
  /** This window's run: it salts the owner keys, so no client of a later window matches them. */
  private readonly run = randomToken(12);
  /** Least recently used first. */
  private readonly known = new Map<string, Known>();
  /** Claim → when it started its MCP sessions of the last minute. */
  private readonly sessions = new Map<string, number[]>();
  private next = 1;
  /** Whether an owner still has changes kept (the checkpoints say): its credential stays. */
  ownsChanges: (owner: string) => boolean = () => false;

  constructor(
    private readonly capacity = 512,
    private readonly now: () => number = Date.now,
  ) {}

  /** A fresh credential, not yet known: `register` it once the client is accepted. */
  static newCredential(): string {
    return randomToken(18);
  }

  /** Makes `credential` known, for the client that claims `claim`. */
  register(credential: string, claim: string | undefined, via: 'http' | 'mcp'): void {
    if (this.known.has(credential)) return;
    const owner = createHash('sha256').update(`${this.run}\0${credential}`).digest('base64url').slice(0, 22);
    this.known.set(credential, { n: this.next++, claim, owner, via });
    if (this.known.size > this.capacity) this.evictOne();
  }

  /** Mints and registers a credential for a client that had none. */
  mint(claim: string | undefined, via: 'http' | 'mcp'): string {
    const credential = ClientRegistry.newCredential();
    this.register(credential, claim, via);
    return credential;
  }

  /**
   * Who a request is: a credential the bridge knows names its client (with the claim made when it
   * was minted); an unknown or absent one counts for nothing, and the request is its claim alone.
   */
  identify(credential: string | undefined, claim: string | undefined): Caller {
    const known = credential === undefined ? undefined : this.known.get(credential);
    if (!known || credential === undefined) {
      return {
        client: `${shortName(claim)} (unverified)`,
        about: `${claim ? `an agent that says it is ${claim}` : 'an agent that gave no name'}, with no credential of the bridge: its name is only a claim`,
        claim,
        credential: undefined,
        owner: undefined,
      };
    }
    this.known.delete(credential); // most recently used last
    this.known.set(credential, known);
    const said = known.claim ?? claim;
    const holds = known.via === 'mcp' ? 'MCP session' : 'credential';
    const approved = known.approvedAt === undefined ? '' : `; you allowed it for 10 minutes at ${clock(known.approvedAt)}`;
    return {
      client: `${shortName(said)} ${known.approvedAt === undefined ? '(unverified)' : '✓'}`,
      about: `${said ? `an agent that says it is ${said}` : 'an agent that gave no name'}, holding ${holds} #${known.n} the bridge minted for it${approved}`,
      claim: said,
      credential,
      owner: known.owner,
    };
  }

  /** The person allowed the client holding `credential` for a while (until `until`). */
  grant(credential: string, until: number): void {
    const known = this.known.get(credential);
    if (!known) return;
    known.grantUntil = until;
    known.approvedAt ??= this.now();
  }

  /** Whether `credential` holds a grant now. */
  granted(credential: string): boolean {
    const until = this.known.get(credential)?.grantUntil;
    return until !== undefined && until > this.now();
  }

  /**
   * Counts an MCP session that `claim` starts: 0 when it may, else the milliseconds until it may
   * start another (it started `SESSIONS_PER_MINUTE` in the last minute).
   */
  admitSession(claim: string | undefined): number {
    const at = this.now();
    const key = claim ?? '';
    const recent = (this.sessions.get(key) ?? []).filter((t) => at - t < MINUTE_MS);
    this.sessions.delete(key); // most recent last
    this.sessions.set(key, recent);
    if (recent.length >= SESSIONS_PER_MINUTE) return MINUTE_MS - (at - recent[0]!);
    recent.push(at);
    if (this.sessions.size > this.capacity) this.sessions.delete(this.sessions.keys().next().value!);
    return 0;
  }

  /** Drops the least recently used credential that holds no live grant and owns no kept change. */
  private evictOne(): void {
    for (const [credential, known] of this.known) {
      if (this.granted(credential) || this.ownsChanges(known.owner)) continue;
      this.known.delete(credential);
      return;
    }
  }
}

/** A name cut for the person's views; "unnamed agent" when there is none. */
function shortName(claim: string | undefined): string {
  if (!claim) return 'unnamed agent';
  return claim.length > SHORT_NAME_CHARS ? `${claim.slice(0, SHORT_NAME_CHARS - 1)}…` : claim;
}

/** The caller of an HTTP request: its credential header, its agent-name header or User-Agent. */
export function httpCaller(registry: ClientRegistry, headers: Headers): Caller {
  return registry.identify(first(headers[CREDENTIAL_HEADER]), claimOf(headers));
}

/**
 * Whose reads a caller's writes are checked against (versions.ts): its credential, else its claim.
 * A credential holder's reads include what it read under its name before it was handed one.
 */
export function readerOf(caller: Caller): Reader {
  const claimKey = `claim:${caller.claim ?? ''}`;
  if (caller.credential === undefined) return { key: claimKey, label: caller.client };
  return { key: caller.credential, label: caller.client, earlier: claimKey };
}
