import { timingSafeEqual } from 'node:crypto';

/**
 * Constant-time over the token's bytes. Only the length can show through the timing, and every
 * token the bridge makes has the same length (32 random bytes, in hex). One per window: it keeps
 * the token's bytes while the token stays the same.
 */
export class BearerCheck {
  private expected: { token: string; bytes: Buffer } | undefined;

  matches(header: string | undefined, token: string): boolean {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    if (!match) return false;
    if (this.expected?.token !== token) this.expected = { token, bytes: Buffer.from(token) };
    const presented = Buffer.from(match[1]!);
    return presented.length === this.expected.bytes.length && timingSafeEqual(presented, this.expected.bytes);
  }
}
