/**
 * The builtin kernel, and the code check's Python, under bubblewrap when the person turns on
 * `agentBridge.kernel.sandbox`. What the sandbox is made of (SETUP.md says why it is bubblewrap
 * driven from here rather than a sandboxing library):
 *   - namespaces of its own: user (also when VS Code runs as root), pid (a fresh /proc that shows
 *     only the sandbox's processes), network (no network, not even the host's 127.0.0.1), ipc, uts,
 *     cgroup where the kernel has one; a new session; killed when VS Code goes; no capabilities;
 *     no nested user namespaces;
 *   - the file system read-only but the workspace folders and a private /tmp; hidden (an empty
 *     folder): the home folder, /tmp, /var/tmp, /run, $XDG_RUNTIME_DIR and every folder holding a
 *     Unix socket the host listens on; what the kernel needs from them comes back read-only;
 *   - read-only over the writable workspace: the kernel's Python (a virtualenv in the workspace),
 *     the extension's files, and what VS Code, git and direnv run later outside (`.git`, `.vscode`,
 *     `.envrc`);
 *   - a seccomp filter (seccompFilter.ts): no Unix socket can be made, whatever files it sees;
 *   - a cleared environment but for PATH, HOME, locale, TERM, TZ and the kernel's own variables.
 *
 * Nothing weaker runs in its place: where a part cannot be made (no bubblewrap, no user namespaces,
 * an old bubblewrap, no filter for this architecture), or the kernel's Python lies where the
 * sandbox could change it, the command fails at once with the reason, which becomes the run's
 * error, and the status bar says which part.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { KernelCommand } from './kernelCommand';
import { seccompProgram } from './seccompFilter';
import { findPython, real, type SandboxPython } from './sandboxPython';

export type SandboxCheck =
  | { ok: true; detail: string }
  /** `part`: what is wrong, in the few words the status bar shows ("no user namespace"); `reason`: the whole story. */
  | { ok: false; part: string; reason: string };

/** What the sandboxed program may see and write. */
export interface SandboxLayout {
  /** Folders it may write (the workspace folders). */
  writable: readonly string[];
  /** The home folder to hide. */
  home: string;
  /** The working folder (the notebook's), readable even when outside the writable ones. */
  cwd?: string;
  /** $XDG_RUNTIME_DIR (the session's sockets: D-Bus, VS Code's IPC), hidden. */
  runtimeDir?: string;
}

/** A command to run and how its sandbox turned out: the status bar shows the check. */
export interface Sandboxed {
  command: KernelCommand;
  check: SandboxCheck;
}

const BWRAP = 'bwrap';
const PROBE_TIMEOUT_MS = 5000;
/** The descriptor the seccomp program reaches bubblewrap on. */
const SECCOMP_FD = 9;

/** The parts of the sandbox, in the order they are tried when the whole cannot be made. */
const PARTS: readonly { part: string; flags: readonly string[]; mounts?: readonly string[] }[] = [
  { part: 'user namespace', flags: ['--unshare-user'] },
  { part: 'pid namespace', flags: ['--unshare-pid'], mounts: ['--proc', '/proc'] },
  { part: 'network namespace', flags: ['--unshare-net'] },
  { part: 'ipc namespace', flags: ['--unshare-ipc'] },
  { part: 'uts namespace', flags: ['--unshare-uts'] },
  { part: 'new session', flags: ['--new-session'] },
  { part: '--die-with-parent', flags: ['--die-with-parent'] },
  { part: '--disable-userns (bubblewrap 0.8 or newer)', flags: ['--disable-userns'] },
  { part: '--cap-drop', flags: ['--cap-drop', 'ALL'] },
];
/** Made where the kernel allows it; nothing depends on it. */
const OPTIONAL = ['--unshare-cgroup-try'];

/** The namespace and process options of every sandbox, before its mounts. */
const PROCESS_FLAGS = [...PARTS.flatMap((p) => p.flags), ...OPTIONAL];
const BASE_MOUNTS = ['--ro-bind', '/', '/', '--dev', '/dev', ...PARTS.flatMap((p) => p.mounts ?? [])];

/** Home, /tmp and the other folders that are hidden, but for /tmp and /var/tmp read-only. */
const SCRATCH = ['/tmp', '/var/tmp'];
/** What a Python run outside the sandbox later may execute, made read-only where it exists in a writable folder. */
const RUN_OUTSIDE = ['.git', '.vscode', '.envrc'];

/** Kept from the host's environment; everything else is dropped. */
const PASSED_ENV = /^(PATH|HOME|LANG|LANGUAGE|LC_[A-Z_]+|TERM|TZ)$/;
/** The kernel's own variables (kernelChild.ts and the controller set them). */
const KERNEL_ENV = new Set([
  'MPLBACKEND',
  'PYTHONIOENCODING',
  'PYTHONUNBUFFERED',
  'AGENT_BRIDGE_CODE_MODE_IN_CELLS',
  'AGENT_BRIDGE_IPYTHON',
]);

const inside = (dir: string, parent: string) => dir === parent || dir.startsWith(parent.endsWith('/') ? parent : `${parent}/`);
const depth = (dir: string) => dir.split('/').length;
const byDepth = (dirs: Iterable<string>) => [...new Set(dirs)].sort((a, b) => depth(a) - depth(b) || a.localeCompare(b));

function run(program: string, args: readonly string[], input?: Buffer) {
  return spawnSync(program, args, { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, input, env: { PATH: process.env['PATH'] } });
}

const notRun = (reason: string): SandboxCheck => ({ ok: false, part: 'no bubblewrap', reason });

/**
 * Whether the whole sandbox can be made here; when not, the first part that cannot, with
 * bubblewrap's own words. `program`: bubblewrap (another one in tests).
 */
export function checkSandbox(program = BWRAP): SandboxCheck {
  const bwrap = (args: readonly string[], input?: Buffer) => run(program, args, input);
  const filter = seccompProgram();
  if (!filter)
    return { ok: false, part: 'no seccomp filter', reason: `there is no seccomp filter for this architecture (${process.arch})` };
  const seccomp = ['--seccomp', '0'];
  const whole = bwrap([...PROCESS_FLAGS, ...BASE_MOUNTS, ...seccomp, '--', 'true'], filter);
  // EPIPE: it refused before reading the filter, and said why.
  if (whole.error && whole.status === null) {
    const code = (whole.error as NodeJS.ErrnoException).code;
    return notRun(
      code === 'ENOENT'
        ? 'bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: apt-get install bubblewrap)'
        : `bubblewrap (bwrap) could not run: ${whole.error.message}`,
    );
  }
  if (whole.status === 0) {
    const version = bwrap(['--version']).stdout?.trim();
    return { ok: true, detail: version || BWRAP };
  }
  const base = bwrap(['--ro-bind', '/', '/', '--', 'true']);
  if (base.status !== 0) return notRun(`bubblewrap (bwrap) cannot run here: ${base.stderr.trim() || `exit ${base.status}`}`);
  const flags: string[] = [];
  const mounts = ['--ro-bind', '/', '/', '--dev', '/dev'];
  for (const { part, flags: own, mounts: ownMounts } of PARTS) {
    flags.push(...own);
    mounts.push(...(ownMounts ?? []));
    const r = bwrap([...flags, ...mounts, '--', 'true']);
    if (r.status !== 0)
      return {
        ok: false,
        part: `no ${part}`,
        reason: `bubblewrap cannot make a sandbox with the ${part}: ${said(r.stderr)}${hint(part)}`,
      };
  }
  const r = bwrap([...flags, ...OPTIONAL, ...mounts, ...seccomp, '--', 'true'], filter);
  return { ok: false, part: 'no seccomp filter', reason: `bubblewrap cannot load the seccomp filter: ${said(r.stderr)}` };
}

const said = (stderr: string) => `"${stderr.trim() || 'no words'}"`;

/** Where unprivileged user namespaces are turned off, how to turn them on. */
function hint(part: string): string {
  if (part !== 'user namespace') return '';
  const apparmor = '/proc/sys/kernel/apparmor_restrict_unprivileged_userns';
  const restricted = fs.existsSync(apparmor) && fs.readFileSync(apparmor, 'utf8').trim() === '1';
  return restricted
    ? ' (AppArmor restricts unprivileged user namespaces here, as Ubuntu 24.04 does: allow them for bwrap with an AppArmor profile, or set kernel.apparmor_restrict_unprivileged_userns=0)'
    : ' (user namespaces may be off: see sysctl user.max_user_namespaces and kernel.unprivileged_userns_clone)';
}

/** The environment the sandboxed program gets: the allowlist of `env`, and a /tmp of its own for caches. */
export function sandboxEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept = Object.entries(env).filter(([k, v]) => v !== undefined && (PASSED_ENV.test(k) || KERNEL_ENV.has(k)));
  return { ...Object.fromEntries(kept), TMPDIR: '/tmp', IPYTHONDIR: '/tmp/.ipython', MPLCONFIGDIR: '/tmp/.matplotlib' };
}

/** The folders of the Unix sockets the host listens on (their files, not abstract names). */
function socketFolders(): string[] {
  let table: string;
  try {
    table = fs.readFileSync('/proc/net/unix', 'utf8');
  } catch {
    return [];
  }
  const folders = table
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/)[7])
    .filter((p): p is string => p !== undefined && p.startsWith('/'))
    .map((p) => path.dirname(p));
  return [...new Set(folders)];
}

/** A command that fails at once, saying why: the kernel's start (and so the run) fails with these words. */
function refusal(reason: string): KernelCommand {
  return { command: '/bin/sh', args: ['-c', 'echo "Agent Bridge: $0" >&2; exit 1', reason], env: {} };
}

const refused = (check: Extract<SandboxCheck, { ok: false }>): Sandboxed => ({
  command: refusal(`agentBridge.kernel.sandbox is on, but ${check.reason}. The kernel does not run unsandboxed.`),
  check,
});

/** The sandbox's init, bubblewrap's one child: its session is the kernel's, where interrupts go. */
export function sandboxSession(bwrapPid: number): number | undefined {
  try {
    const child = Number(fs.readFileSync(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(child) && child > 0 ? child : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `argv` (python, its arguments) in the sandbox `layout` describes, with `env` cut to the
 * allowlist; or a command that fails with the reason when the sandbox cannot be made that strong.
 */
export function sandboxCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  layout: SandboxLayout,
  check: SandboxCheck = checkSandbox(),
): Sandboxed {
  if (!check.ok) return refused(check);
  const [python, ...rest] = argv;
  if (!python) throw new Error('no python to sandbox');
  const filter = seccompProgram();
  if (!filter) return refused({ ok: false, part: 'no seccomp filter', reason: `there is no seccomp filter for ${process.arch}` });
  const home = real(layout.home);
  const writable = byDepth(layout.writable.map(real));
  const found = findPython(python, env['PATH'] ?? '', writable, (launcher) => askLauncher(launcher, env, filter));
  if ('error' in found) return refused({ ok: false, part: 'Python refused', reason: found.error });
  const mounts = mountsFor(found, rest, { ...layout, home, writable });
  if ('error' in mounts) return refused({ ok: false, part: 'Python refused', reason: mounts.error });
  const args = [...PROCESS_FLAGS, ...mounts.args, '--seccomp', String(SECCOMP_FD), '--', found.executable, ...rest];
  return {
    command: {
      command: BWRAP,
      args,
      env: sandboxEnv(env),
      feed: { fd: SECCOMP_FD, bytes: filter },
      interruptGroup: sandboxSession,
    },
    check,
  };
}

/** The mounts of the sandbox, in the order bubblewrap must make them. */
function mountsFor(
  python: SandboxPython,
  rest: readonly string[],
  layout: SandboxLayout & { home: string; writable: readonly string[] },
): { args: string[] } | { error: string } {
  const { home, writable } = layout;
  const cwd = layout.cwd && real(layout.cwd);
  const kernelFiles = rest.filter((a) => path.isAbsolute(a)).map((a) => real(path.dirname(a)));
  const readable = byDepth([...python.prefixes.map(real), ...kernelFiles, ...(cwd ? [cwd] : [])]);
  const isWritable = (dir: string) => writable.some((w) => inside(dir, w));

  // The Python and the extension's files stay as they are, even where the workspace lies over them.
  const kept = [
    ...python.prefixes.map((dir) => ["the kernel's Python", real(dir)]),
    ...kernelFiles.map((dir) => ["the extension's files", dir]),
  ];
  for (const [what, dir] of kept as [string, string][]) {
    const within = writable.find((w) => inside(w, dir));
    if (within)
      return {
        error:
          `${what} (${dir}) ${within === dir ? 'is' : 'holds'} the writable workspace folder ${within}, so a sandboxed run could change what the bridge starts: ` +
          'keep the virtualenv in a folder of its own inside the workspace (such as .venv), or outside it',
      };
    if (dir === '/' || (inside(home, dir) && !isWritable(home)))
      return {
        error: `${what} (${dir}) holds your home folder: the sandbox would show all of it; use a Python installed elsewhere`,
      };
  }
  const fixed = [...SCRATCH, '/run', ...(layout.runtimeDir ? [layout.runtimeDir] : []), home].map(real);
  // Not a folder of / itself (a socket right in /etc would hide all of /etc), nor one the kernel
  // reads or writes: their sockets stay visible, and the seccomp filter keeps them unreachable.
  const sockets = socketFolders()
    .map(real)
    .filter((d) => depth(d) > 2 && !readable.some((r) => inside(d, r)) && !isWritable(d));
  // A home inside /tmp gets an empty folder of its own on top of the empty /tmp; a socket folder
  // inside another hidden one is hidden already.
  const hidden = byDepth([...fixed.filter((d) => !isWritable(d)), ...sockets]).filter(
    (d, i, all) => fixed.includes(d) || !all.slice(0, i).some((h) => inside(d, h)),
  );
  const isHidden = (dir: string) => hidden.some((h) => inside(dir, h));
  const protectedDirs = byDepth(
    [
      ...readable.filter((d) => d !== cwd),
      ...writable.flatMap((w) => [...RUN_OUTSIDE.map((name) => path.join(w, name)), ...nestedRepositories(w)]),
    ].filter((d) => isWritable(d) && fs.existsSync(d)),
  );

  const args = [...BASE_MOUNTS];
  for (const dir of hidden) args.push('--tmpfs', dir);
  for (const dir of readable) if (isHidden(dir) && !isWritable(dir)) args.push('--ro-bind', dir, dir);
  for (const dir of writable) args.push('--bind', dir, dir);
  for (const dir of protectedDirs) args.push('--ro-bind', dir, dir);
  // Made read-only once what lies in them is mounted; /tmp and /var/tmp stay the sandbox's scratch space.
  for (const dir of hidden) if (!SCRATCH.includes(dir)) args.push('--remount-ro', dir);
  if (cwd) args.push('--chdir', cwd);
  return { args };
}

/** `.git` of the repositories one folder down in a workspace folder (VS Code's Git opens those too). */
function nestedRepositories(folder: string): string[] {
  try {
    return fs
      .readdirSync(folder, { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
      .map((e) => path.join(folder, e.name, '.git'));
  } catch {
    return [];
  }
}

/**
 * Which interpreter a launcher script starts, asked in a sandbox that writes nothing but its own
 * /tmp: the rest read-only (the home folder visible, where launchers live), no network, `-I -S` so
 * no site-packages code runs, from `/` so no project file picks the version.
 */
function askLauncher(launcher: string, env: NodeJS.ProcessEnv, filter: Buffer): string | undefined {
  const folder = real(path.dirname(launcher));
  const back = SCRATCH.some((d) => inside(folder, d)) ? ['--ro-bind', folder, folder] : [];
  const r = spawnSync(
    BWRAP,
    [
      ...PROCESS_FLAGS,
      ...BASE_MOUNTS,
      ...SCRATCH.flatMap((d) => ['--tmpfs', d]),
      ...back,
      '--chdir',
      '/',
      '--seccomp',
      '0',
      '--',
      launcher,
      '-I',
      '-S',
      '-c',
      'import sys; print(sys.executable)',
    ],
    { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, input: filter, env: sandboxEnv(env) },
  );
  const said = r.status === 0 ? r.stdout.trim() : '';
  return said && !said.includes('\n') ? said : undefined;
}
