import { chmodSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Writes `content` to `path` whole or not at all: write-then-rename, so a reader (or a crash)
 * never sees a partial file. Mode 0600 always (these files can hold a token or what an agent
 * changed); a missing folder is made 0700.
 */
export function writeFileAtomic(path: string, content: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode: 0o600 });
  chmodSync(tmp, 0o600); // the mode above is filtered by umask
  renameSync(tmp, path);
}
