import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, mkdirSync, openSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** Create a new file, failing if anything (a file, a planted link) has the name; never follow a link. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);

/**
 * Writes `content` to `path` whole or not at all: write-then-rename, so a reader (or a crash)
 * never sees a partial file. Mode 0600 always (these files can hold a token or what an agent
 * changed); a missing folder is made 0700. The temporary file has a random name beside the
 * target and is created new (O_EXCL), so nothing planted there is written through; the rename
 * replaces a link at `path` itself, never the file it points at.
 */
export function writeFileAtomic(path: string, content: string): void {
  const folder = dirname(path);
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const tmp = join(folder, `.${basename(path)}.${randomBytes(8).toString('hex')}.tmp`);
  const fd = openSync(tmp, CREATE_NEW, 0o600);
  try {
    try {
      fchmodSync(fd, 0o600); // the mode above is filtered by umask
      writeFileSync(fd, content);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (error) {
    try {
      unlinkSync(tmp);
    } catch {
      // already renamed or gone
    }
    throw error;
  }
}
