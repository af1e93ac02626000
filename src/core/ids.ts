import { randomBytes, randomInt } from 'node:crypto';

const BASE36 = '0123456789abcdefghijklmnopqrstuvwxyz';

/** `bytes` random bytes as URL-safe text (base64url): ids and secrets nobody can guess. */
export const randomToken = (bytes: number): string => randomBytes(bytes).toString('base64url');

/** `bytes` random bytes as hex: tags, salts and tokens where only [0-9a-f] may appear. */
export const randomHex = (bytes: number): string => randomBytes(bytes).toString('hex');

/** `<prefix>-<time, base 36>-<6 hex>`: unique, and sorts by when it was made. */
export const timedId = (prefix: string): string => `${prefix}-${Date.now().toString(36)}-${randomHex(3)}`;

/** `prefix` and `length` random characters of [0-9a-z], none of the `taken` ids: short, and easy to read back. */
export function freshId(prefix: string, length: number, taken: { has(id: string): boolean }): string {
  let id: string;
  do id = prefix + Array.from({ length }, () => BASE36[randomInt(BASE36.length)]).join('');
  while (taken.has(id));
  return id;
}
