/**
 * The files a run created or changed under the workspace folders: their mtimes and sizes noted
 * as it starts and compared as it ends. Bounded: so many entries walked, so long a walk, so many
 * files listed; tool and cache folders (.git, node_modules, virtual environments) are not walked,
 * and links are not followed.
 */
import { promises as fs, type Dirent } from 'node:fs';
import { join } from 'node:path';
import type { ChangedFile, FileWatch, RunFiles } from '../core/runs/runHistory';

export interface WalkLimits {
  readonly entries: number;
  readonly ms: number;
  readonly listed: number;
}

export const WALK_LIMITS: WalkLimits = { entries: 20_000, ms: 3_000, listed: 200 };

const SKIPPED = new Set([
  '.git',
  '.hg',
  '.svn',
  'node_modules',
  '.venv',
  'venv',
  '.tox',
  '.nox',
  '__pycache__',
  '.mypy_cache',
  '.pytest_cache',
  '.ruff_cache',
  '.ipynb_checkpoints',
  '.vscode-test',
]);

interface Seen {
  readonly mtimeMs: number;
  readonly size: number;
}

interface Snapshot {
  readonly files: Map<string, Seen>;
  /** Why the walk stopped before it saw everything. */
  readonly cut?: string;
}

/** Watches the folders `roots` names as each run starts (absolute paths; none: nothing is watched). */
export function workspaceWatch(roots: () => readonly string[], limits: WalkLimits = WALK_LIMITS): FileWatch {
  return (sinceMs) => {
    const folders = roots();
    if (!folders.length) return () => Promise.resolve({ files: [], incomplete: 'No workspace folder was open' });
    const before = snapshot(folders, limits);
    return async () => changes(await before, await snapshot(folders, limits), sinceMs, limits);
  };
}

async function snapshot(roots: readonly string[], limits: WalkLimits): Promise<Snapshot> {
  const files = new Map<string, Seen>();
  const end = Date.now() + limits.ms;
  const dirs = [...roots];
  let entries = 0;
  for (let dir = dirs.shift(); dir !== undefined; dir = dirs.shift()) {
    if (Date.now() > end) return { files, cut: `the walk of the workspace stopped after ${limits.ms / 1000} s` };
    let found: Dirent[];
    try {
      found = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      continue; // gone, or not ours to read
    }
    if ((entries += found.length) > limits.entries)
      return { files, cut: `the walk of the workspace stopped at ${limits.entries} entries` };
    const stats: Promise<void>[] = [];
    for (const entry of found) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) dirs.push(path);
      } else if (entry.isFile())
        stats.push(
          fs.stat(path).then(
            (s) => void files.set(path, { mtimeMs: s.mtimeMs, size: s.size }),
            () => undefined,
          ),
        );
    }
    await Promise.all(stats);
  }
  return { files };
}

/**
 * What is new or different after; and what the start's walk found already written during the run
 * (the walk goes on as the run starts), by its mtime. A file the start's walk did not reach (it
 * was cut short) counts only by its mtime.
 */
function changes(before: Snapshot, after: Snapshot, sinceMs: number, limits: WalkLimits): RunFiles {
  const found: (ChangedFile & { mtimeMs: number })[] = [];
  for (const [path, now] of after.files) {
    const then = before.files.get(path);
    const change =
      then === undefined
        ? before.cut === undefined || now.mtimeMs >= sinceMs
          ? 'created'
          : null
        : then.mtimeMs !== now.mtimeMs || then.size !== now.size || now.mtimeMs >= sinceMs
          ? 'changed'
          : null;
    if (change)
      found.push({ path, change, bytes: now.size, modifiedAt: new Date(now.mtimeMs).toISOString(), mtimeMs: now.mtimeMs });
  }
  found.sort((a, b) => b.mtimeMs - a.mtimeMs);
  const why = [
    before.cut ?? after.cut,
    found.length > limits.listed && `${found.length - limits.listed} more files changed than the ${limits.listed} listed`,
  ].filter(Boolean);
  return {
    files: found.slice(0, limits.listed).map(({ mtimeMs: _m, ...file }) => file),
    ...(why.length && { incomplete: why.join('; ') }),
  };
}
