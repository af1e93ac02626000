/**
 * The builtin kernel under bubblewrap, when the person turns on `agentBridge.kernel.sandbox`:
 * its own network namespace (no network), the whole file system read-only except the workspace
 * folders and a private /tmp, and the home folder an empty read-only folder but for the workspace,
 * the Python the kernel runs and the kernel's own files.
 *
 * Where bubblewrap cannot run, nothing pretends: the kernel is not started unsandboxed, its start
 * fails with bubblewrap's own words, and the status bar and the log say why.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** What to spawn instead of `python -u kernel.py 3 4`. */
export interface KernelCommand {
  command: string;
  args: string[];
}

export type SandboxCheck = { ok: true; detail: string } | { ok: false; reason: string };

/** What the sandboxed kernel may see and write. */
export interface SandboxLayout {
  /** Folders it may write (the workspace folders). */
  writable: readonly string[];
  /** The home folder to hide. */
  home: string;
  /** The kernel's working folder (the notebook's), readable even when outside the writable ones. */
  cwd?: string;
}

const BWRAP = 'bwrap';
const PROBE_TIMEOUT_MS = 5000;

/** Whether bubblewrap runs here, with a network namespace of its own: bubblewrap's own words when not. */
export function checkBubblewrap(): SandboxCheck {
  const r = spawnSync(BWRAP, ['--ro-bind', '/', '/', '--dev', '/dev', '--unshare-net', '--', '/bin/true'], {
    encoding: 'utf8',
    timeout: PROBE_TIMEOUT_MS,
  });
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    return {
      ok: false,
      reason:
        code === 'ENOENT'
          ? 'bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: apt-get install bubblewrap)'
          : `bubblewrap (bwrap) could not run: ${r.error.message}`,
    };
  }
  if (r.status !== 0) return { ok: false, reason: `bubblewrap (bwrap) cannot make a sandbox here: ${r.stderr.trim()}` };
  const version = spawnSync(BWRAP, ['--version'], { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS }).stdout?.trim();
  return { ok: true, detail: version || BWRAP };
}

/** The real interpreter behind `python` (a PATH name or a shim) and its prefixes, which must stay visible. */
function pythonPaths(python: string): { executable: string; prefixes: string[] } | { error: string } {
  const r = spawnSync(python, ['-c', 'import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)'], {
    encoding: 'utf8',
    timeout: PROBE_TIMEOUT_MS,
  });
  const [executable, ...prefixes] = (r.stdout ?? '').trim().split('\n');
  if (r.status !== 0 || !executable) return { error: `"${python}" did not run: ${r.error?.message ?? r.stderr.trim()}` };
  return { executable, prefixes };
}

/** The path with its symlinks resolved: bubblewrap mounts on real folders and cannot make one through a link. */
function real(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

const inside = (dir: string, parent: string) => dir === parent || dir.startsWith(parent.endsWith('/') ? parent : `${parent}/`);

/** A command that fails at once, saying why: the kernel's start fails with these words. */
function refusal(reason: string): KernelCommand {
  return { command: '/bin/sh', args: ['-c', 'echo "Agent Bridge: $0" >&2; exit 1', reason] };
}

/**
 * `argv` (python, its arguments) wrapped in bubblewrap for `layout`, or a command that fails with
 * the reason when the sandbox cannot be made.
 */
export function sandboxedKernel(argv: readonly string[], layout: SandboxLayout, check = checkBubblewrap()): KernelCommand {
  if (!check.ok) return refusal(`agentBridge.kernel.sandbox is on, but ${check.reason}. The kernel does not run unsandboxed.`);
  const [python, ...rest] = argv;
  if (!python) throw new Error('no python to sandbox');
  const found = pythonPaths(python);
  if ('error' in found) return refusal(found.error);
  const home = real(layout.home);
  const writable = [...new Set(layout.writable.map(real))];
  const cwd = layout.cwd && real(layout.cwd);
  // Hidden: the home folder and /tmp (each replaced by an empty one). What the kernel needs to
  // start that lies inside them comes back read-only.
  // /tmp first: a home inside it (a clone under /tmp) is hidden on top of the empty /tmp, not under it.
  const hidden = writable.some((w) => inside(home, w)) ? ['/tmp'] : ['/tmp', home];
  const readable = [
    ...found.prefixes,
    path.dirname(found.executable),
    ...rest.filter((a) => path.isAbsolute(a)).map((a) => path.dirname(a)),
  ];
  if (cwd) readable.push(cwd);
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-net', '--die-with-parent'];
  for (const dir of hidden) args.push('--tmpfs', dir);
  for (const dir of new Set(readable.map(real)))
    if (hidden.some((h) => inside(dir, h)) && !writable.some((w) => inside(dir, w))) args.push('--ro-bind', dir, dir);
  for (const dir of writable) args.push('--bind', dir, dir);
  // The home stays unwritable; IPython and matplotlib keep their caches in the private /tmp.
  if (hidden.includes(home)) args.push('--remount-ro', home);
  for (const [name, value] of [
    ['TMPDIR', '/tmp'],
    ['IPYTHONDIR', '/tmp/.ipython'],
    ['MPLCONFIGDIR', '/tmp/.matplotlib'],
  ])
    args.push('--setenv', name, value);
  if (cwd) args.push('--chdir', cwd);
  args.push('--', found.executable, ...rest);
  // The driver interrupts with SIGINT to the whole process group: bubblewrap must not die of it
  // (its child would die with it), so it starts with SIGINT ignored; kernel.py sets its own handler.
  return { command: '/bin/sh', args: ['-c', 'trap "" INT; exec "$0" "$@"', BWRAP, ...args] };
}
