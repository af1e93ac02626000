import type { Reader } from './versions';
import { randomToken } from './ids';

/**
 * Who an agent action comes from. Any client can send any name (an agent-name header, MCP's
 * `clientInfo`, a User-Agent), so a name is only ever a claim: shown as "says it is X" and never
 * unlocking anything. What tells clients apart is a credential the bridge minted and handed to
 * one client: an MCP session id returned once the SDK accepted `initialize`, or, over plain HTTP,
 * the credential returned with the answer the person allowed "for 10 minutes". Grants bind to it.
 */

/** Request header an HTTP agent names itself with (the configurations the bridge writes set it). */
export const CLIENT_HEADER = 'x-agent-bridge-client';
/** Request and response header carrying a credential the bridge minted for one HTTP client. */
export const CREDENTIAL_HEADER = 'x-agent-bridge-credential';
/** MCP's session header: the bridge mints one per accepted `initialize` and links later calls through it. */
export const MCP_SESSION_HEADER = 'mcp-session-id';

/** Who a request is, as the access policy and the activity record see it. */
export interface Caller {
  /** One phrase for the person: "an agent that says it is X", or "agent #3 (says it is X)". */
  readonly client: string;
  /** The name the client gave (header, clientInfo, else User-Agent); undefined: none at all. */
  readonly claim: string | undefined;
  /** The bridge-minted credential this request carried, known to the bridge; undefined: none. */
  readonly credential: string | undefined;
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

/** The credentials the bridge minted, each with the claim of the client it went to. Bounded. */
export class ClientRegistry {
  private readonly known = new Map<string, { n: number; claim: string | undefined }>();
  private next = 1;

  constructor(private readonly capacity = 512) {}

  /** A fresh credential, not yet known: `register` it once the client is accepted. */
  static newCredential(): string {
    return randomToken(18);
  }

  /** Makes `credential` known, for the client that claims `claim`. */
  register(credential: string, claim: string | undefined): void {
    if (this.known.has(credential)) return;
    this.known.set(credential, { n: this.next++, claim });
    if (this.known.size > this.capacity) this.known.delete(this.known.keys().next().value!);
  }

  /** Mints and registers a credential for a client that had none. */
  mint(claim: string | undefined): string {
    const credential = ClientRegistry.newCredential();
    this.register(credential, claim);
    return credential;
  }

  /**
   * Who a request is: a credential the bridge knows names its client (with the claim made when it
   * was minted); an unknown or absent one counts for nothing, and the request is its claim alone.
   */
  identify(credential: string | undefined, claim: string | undefined): Caller {
    const known = credential === undefined ? undefined : this.known.get(credential);
    if (!known) return { client: describeClaim(claim), claim, credential: undefined };
    const said = known.claim ?? claim;
    return { client: `agent #${known.n} (${said ? `says it is ${said}` : 'no name given'})`, claim: said, credential };
  }
}

function describeClaim(claim: string | undefined): string {
  return claim ? `an agent that says it is ${claim}` : 'an agent that gave no name';
}

/** The caller of an HTTP request: its credential header, its agent-name header or User-Agent. */
export function httpCaller(registry: ClientRegistry, headers: Headers): Caller {
  return registry.identify(first(headers[CREDENTIAL_HEADER]), claimOf(headers));
}

/** Whose reads a caller's writes are checked against: its credential, else its claim (versions.ts). */
export function readerOf(caller: Caller): Reader {
  return { key: caller.credential ?? `claim:${caller.claim ?? ''}`, label: caller.client };
}
