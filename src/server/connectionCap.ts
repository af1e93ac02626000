import type { Server } from 'node:http';
import type { Socket } from 'node:net';

interface Held {
  /** Requests on it whose answer is not over. */
  inFlight: number;
  /** When it last had none (ms, performance clock). */
  idleSince: number;
}

/**
 * Holds `server` to `cap` sockets at once, so that sockets doing nothing cannot lock everyone
 * out: at the cap, a new connection takes the slot of an idle socket (no request in flight) —
 * one that never sent a byte first, else the one idle longest. Only when every socket has a
 * request in flight is the new one closed at once.
 */
export function capConnections(server: Server, cap: number): void {
  const sockets = new Map<Socket, Held>();
  const evictIdle = (): boolean => {
    let chosen: Socket | undefined;
    let rank = Infinity;
    for (const [socket, held] of sockets) {
      if (held.inFlight) continue;
      // Silent sockets first (rank below any time), then by how long they have been idle.
      const r = socket.bytesRead === 0 ? held.idleSince - 1e15 : held.idleSince;
      if (r < rank) [chosen, rank] = [socket, r];
    }
    if (!chosen) return false;
    sockets.delete(chosen);
    chosen.destroy();
    return true;
  };
  server.on('connection', (socket: Socket) => {
    if (sockets.size >= cap && !evictIdle()) {
      socket.destroy();
      return;
    }
    sockets.set(socket, { inFlight: 0, idleSince: performance.now() });
    socket.once('close', () => sockets.delete(socket));
  });
  server.on('request', (req, res) => {
    const held = sockets.get(req.socket);
    if (!held) return;
    held.inFlight++;
    res.once('close', () => {
      held.inFlight--;
      held.idleSince = performance.now();
    });
  });
}
