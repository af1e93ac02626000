/**
 * One walk of the workspace folders for the run history (core/runs/runFiles.ts): each file's
 * times and size. Made so a large workspace costs the extension host little: the walk works in
 * slices of 2 ms between which the event loop runs, tool and cache folders (.git, node_modules,
 * virtual environments) are left out, links not followed, and it is bounded by entries and time
 * (the snapshot says when it was cut short).
 */
import { lstatSync, opendirSync, type Dir } from 'node:fs';
import { join } from 'node:path';
import type { SeenFile, WorkspaceWalk } from '../core/runs/runFiles';

export interface WalkLimits {
  /** Directory entries read at most. */
  readonly entries: number;
  /** Longest walk. */
  readonly ms: number;
}

export const WALK_LIMITS: WalkLimits = { entries: 50_000, ms: 10_000 };

/** Longest the walk holds the event loop at a time (checked after each call: a slow disk holds it one call longer). */
const SLICE_MS = 2;
/** Directory entries read per system call. */
const DIR_CHUNK = 64;

const SKIPPED = new Set([
  '.git',
  '.hg',
  '.svn',
  'node_modules',
  '.venv',
  'venv',
  '.conda',
  'site-packages',
  '.tox',
  '.nox',
  '__pycache__',
  '.mypy_cache',
  '.pytest_cache',
  '.ruff_cache',
  '.cache',
  '.ipynb_checkpoints',
  '.vscode-test',
]);
/** A directory holding one of these is a Python environment, whatever its name. */
const ENVIRONMENT_MARKS = new Set(['pyvenv.cfg', 'conda-meta']);

/** Walks the folders `roots` names (absolute paths) when called, keeping the files written since `sinceMs`. */
export function workspaceWalk(roots: () => readonly string[], limits: WalkLimits = WALK_LIMITS): WorkspaceWalk {
  return async (sinceMs) => {
    const startedAt = Date.now();
    const files = new Map<string, SeenFile>();
    const folders = roots();
    if (!folders.length) return { startedAt, sinceMs, files, cut: 'no workspace folder is open' };
    const cut = await walk(folders, files, { left: limits.entries, until: startedAt + limits.ms, limits, sinceMs });
    return { startedAt, sinceMs, files, ...(cut && { cut }) };
  };
}

interface Budget {
  /** Files written before are not kept. */
  readonly sinceMs: number;
  /** Entries still to be read. */
  left: number;
  readonly until: number;
  readonly limits: WalkLimits;
}

/**
 * Breadth first (when cut short, the shallow files were seen); why it stopped early, if it did.
 * The file system is read with synchronous calls (a few microseconds each, no promise or thread
 * hand-off per file), in slices of SLICE_MS at most, each a task of its own.
 */
async function walk(roots: readonly string[], files: Map<string, SeenFile>, budget: Budget): Promise<string | undefined> {
  const slice = new Slice();
  const dirs = [...roots];
  for (let next = 0; next < dirs.length; next++) {
    if (Date.now() > budget.until) return `the walk of the workspace stopped after ${budget.limits.ms / 1000} s`;
    const listed = await list(dirs[next]!, budget, slice);
    if (typeof listed === 'string') return listed;
    if (listed.environment) continue;
    dirs.push(...listed.dirs);
    for (const path of listed.files) {
      if (slice.over()) await slice.next();
      let seen;
      try {
        seen = lstatSync(path, { throwIfNoEntry: false });
      } catch {
        continue; // not ours to read
      }
      if (seen?.isFile() && (seen.mtimeMs >= budget.sinceMs || seen.birthtimeMs >= budget.sinceMs))
        files.set(path, { mtimeMs: seen.mtimeMs, bornMs: seen.birthtimeMs, size: seen.size });
    }
  }
  return undefined;
}

/** A directory's files and the directories to walk in it; or why the walk must stop. */
async function list(
  dir: string,
  budget: Budget,
  slice: Slice,
): Promise<{ files: string[]; dirs: string[]; environment: boolean } | string> {
  const found = { files: [] as string[], dirs: [] as string[], environment: false };
  let handle: Dir;
  try {
    handle = opendirSync(dir, { bufferSize: DIR_CHUNK });
  } catch {
    return found; // gone, or not ours to read
  }
  try {
    for (let entry = handle.readSync(); entry; entry = handle.readSync()) {
      if (--budget.left < 0)
        return `the walk of the workspace stopped at ${budget.limits.entries.toLocaleString('en-US')} entries`;
      if (ENVIRONMENT_MARKS.has(entry.name)) found.environment = true;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) found.dirs.push(path);
      } else if (entry.isFile()) found.files.push(path);
      if (slice.over()) await slice.next();
    }
  } catch {
    // unreadable part way: what was read stands
  } finally {
    handle.closeSync();
  }
  return found;
}

/** The walk's time on the event loop: SLICE_MS at a time, each slice a task of its own. */
class Slice {
  private ends = performance.now() + SLICE_MS;

  over(): boolean {
    return performance.now() >= this.ends;
  }

  /** Lets the event loop run (timers, I/O), then starts the next slice. */
  async next(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.ends = performance.now() + SLICE_MS;
  }
}
