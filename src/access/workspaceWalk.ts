/**
 * One walk of the workspace folders for the run history (core/runs/runFiles.ts): each file's
 * times and size. Made so a large workspace costs the extension host little: directories read a
 * few dozen entries at a time and files stat'ed a few at a time (no callback handles more than a
 * handful, so the event loop is never held long), tool and cache folders (.git, node_modules,
 * virtual environments) left out, links not followed, and bounded by entries and time (the
 * snapshot says when it was cut short).
 */
import { promises as fs, type Dir } from 'node:fs';
import { join } from 'node:path';
import type { SeenFile, WorkspaceWalk } from '../core/runs/runFiles';

export interface WalkLimits {
  /** Directory entries read at most. */
  readonly entries: number;
  /** Longest walk. */
  readonly ms: number;
}

export const WALK_LIMITS: WalkLimits = { entries: 50_000, ms: 10_000 };

/** Entries read from a directory per call; files stat'ed at once (the thread pool is shared with the rest of the host). */
const DIR_CHUNK = 64;
const STATS_AT_ONCE = 4;

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

/** Walks the folders `roots` names (absolute paths) when called. */
export function workspaceWalk(roots: () => readonly string[], limits: WalkLimits = WALK_LIMITS): WorkspaceWalk {
  return async () => {
    const startedAt = Date.now();
    const files = new Map<string, SeenFile>();
    const folders = roots();
    if (!folders.length) return { startedAt, files, cut: 'no workspace folder is open' };
    const cut = await walk(folders, files, { left: limits.entries, until: startedAt + limits.ms, limits });
    return { startedAt, files, ...(cut && { cut }) };
  };
}

interface Budget {
  /** Entries still to be read. */
  left: number;
  readonly until: number;
  readonly limits: WalkLimits;
}

/** Breadth first (when cut short, the shallow files were seen); why it stopped early, if it did. */
async function walk(roots: readonly string[], files: Map<string, SeenFile>, budget: Budget): Promise<string | undefined> {
  const dirs = [...roots];
  for (let next = 0; next < dirs.length; next++) {
    const listed = await list(dirs[next]!, budget);
    if (typeof listed === 'string') return listed;
    if (listed.environment) continue;
    dirs.push(...listed.dirs);
    let at = 0;
    const statNext = async (): Promise<void> => {
      for (let i = at++; i < listed.files.length; i = at++) {
        const path = listed.files[i]!;
        const seen = await fs.lstat(path).catch(() => undefined); // gone meanwhile
        if (seen?.isFile()) files.set(path, { mtimeMs: seen.mtimeMs, bornMs: seen.birthtimeMs, size: seen.size });
      }
    };
    await Promise.all(Array.from({ length: STATS_AT_ONCE }, statNext));
    if (Date.now() > budget.until) return `the walk of the workspace stopped after ${budget.limits.ms / 1000} s`;
  }
  return undefined;
}

/** A directory's files and the directories to walk in it; or why the walk must stop. */
async function list(dir: string, budget: Budget): Promise<{ files: string[]; dirs: string[]; environment: boolean } | string> {
  const found = { files: [] as string[], dirs: [] as string[], environment: false };
  let handle: Dir;
  try {
    handle = await fs.opendir(dir, { bufferSize: DIR_CHUNK });
  } catch {
    return found; // gone, or not ours to read
  }
  try {
    for await (const entry of handle) {
      if (--budget.left < 0)
        return `the walk of the workspace stopped at ${budget.limits.entries.toLocaleString('en-US')} entries`;
      if (ENVIRONMENT_MARKS.has(entry.name)) found.environment = true;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED.has(entry.name)) found.dirs.push(path);
      } else if (entry.isFile()) found.files.push(path);
    }
  } catch {
    // unreadable part way: what was read stands
  }
  return found;
}
