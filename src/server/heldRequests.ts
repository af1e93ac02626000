import { BridgeError } from '../core/bridgeError';
import { httpCaller, readerOf, type ClientRegistry } from '../core/agents/clients';
import { MAX_CONNECTIONS } from './listen';
import type { Route } from './route';

export interface HeldLimits {
  /** Requests one client may have waiting or streaming at once. */
  perClient: number;
  /** All clients together: the other sockets stay free for short requests (reads, edits, /health). */
  inAll: number;
}

/**
 * A client's share of the sockets: 32 waits or streams at once, and 192 of the 256 for all
 * clients together. A client is told apart by the credential the bridge minted for it, else by
 * the name it gives (a claim: a client that changes its name each time meets the shared limit).
 */
export const HELD_LIMITS: HeldLimits = { perClient: 32, inAll: MAX_CONNECTIONS - 64 };

/**
 * Counts the requests of the rows that hold (`holds`: a wait, a run waited for, a stream) while
 * their answer is open, per client and in all; past a limit the request is a 429 naming it
 * before anything else is done. Applied where the route table is mounted.
 */
export function limitHeld<Ctx extends { access: { identities: ClientRegistry } }>(
  rows: readonly Route<Ctx>[],
  limits: HeldLimits = HELD_LIMITS,
): Route<Ctx>[] {
  const byClient = new Map<string, number>();
  let inAll = 0;
  return rows.map((row) => {
    if (!row.holds) return row;
    return {
      ...row,
      handle: (input, ctx) => {
        const client = readerOf(httpCaller(ctx.access.identities, input.req.headers)).key;
        const mine = byClient.get(client) ?? 0;
        if (mine >= limits.perClient)
          throw new BridgeError(
            'busy',
            `This client has ${mine} requests waiting or streaming, the most one client may have open at once (${limits.perClient}): ` +
              'let one end (or close it) before you send another',
            { limit: limits.perClient },
          );
        if (inAll >= limits.inAll)
          throw new BridgeError(
            'busy',
            `The bridge has ${inAll} requests waiting or streaming, the most it holds for all clients together (${limits.inAll}): ` +
              'retry once one ends',
            { limit: limits.inAll },
          );
        byClient.set(client, mine + 1);
        inAll++;
        input.res.once('close', () => {
          inAll--;
          const left = (byClient.get(client) ?? 1) - 1;
          if (left) byClient.set(client, left);
          else byClient.delete(client);
        });
        return row.handle(input, ctx);
      },
    };
  });
}
