/**
 * The records of running sandboxes (`.vscode-test/sandboxes/<id>.json`) and the processes they
 * own: how cleanup finds exactly a sandbox's processes (recorded pids with their start times,
 * process groups, and the marker variable in their environment) and nothing else.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MARKER_VAR, REPO_ROOT, STACK } from './stack';
import { sleep } from '../src/core/sleep';
import { writeFileAtomic } from '../src/fsAtomic';

/** What `.vscode-test/sandboxes/<id>.json` holds. */
export interface SandboxRecord {
  id: string;
  kind: string;
  status: 'starting' | 'running' | 'stopping' | 'failed';
  error?: string;
  root: string;
  /** The sandbox's short TMPDIR, outside `root` (see SHORT_TMP_PREFIX). */
  tmp?: string;
  workspace: string;
  /** The Node process that owns the sandbox (runs the launcher). */
  launcherPid: number;
  codeServerPid?: number;
  codeServerPort?: number;
  chromiumPid?: number;
  /** Process groups created for this sandbox (code-server's, Chromium's). */
  pgids: number[];
  /** Individual processes (launcher, code-server, Chromium). */
  pids: number[];
  /** Start time (clock ticks since boot) of each recorded pid, to tell it from a reused pid. */
  starts: Record<string, number>;
  createdAt: string;
  /** Launcher output file of detached sandboxes (sandbox-up). */
  logFile?: string;
  /** Anything the owner wants to publish (sandbox-up puts the bridge URL here). */
  info?: Record<string, unknown>;
}

// ------------------------------------------------------------------- processes (Linux /proc)

export interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
  /** Start time in clock ticks since boot: with the pid, a process identity that survives pid reuse. */
  start: number;
  cmdline: string;
}

export function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    //  cutime cstime priority nice threads itrealvalue starttime ..."; comm may hold spaces or ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (rest[0] === 'Z' || rest[0] === 'X') return undefined; // zombie / dead
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    return { pid, ppid: Number(rest[1]), pgid: Number(rest[2]), start: Number(rest[19]), cmdline };
  } catch {
    return undefined;
  }
}

export function listProcs(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const info = readProc(Number(name));
    if (info) out.push(info);
  }
  return out;
}

/** True when the process's environment carries `AGENT_BRIDGE_SANDBOX=<id>`: proof that it is ours. */
export function carriesMarker(pid: number, id: string): boolean {
  try {
    const environ = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
    return environ.split('\0').includes(`${MARKER_VAR}=${id}`);
  } catch {
    return false;
  }
}

/** True when `pid` runs and is the very process recorded (same start time), not a reused pid. */
export function isRecordedProcess(record: Pick<SandboxRecord, 'starts'>, pid: number): boolean {
  const info = readProc(pid);
  return info !== undefined && record.starts[String(pid)] === info.start;
}

/**
 * The live processes of a recorded sandbox, and only those: recorded pids (checked against their
 * recorded start time, since pids get reused), members of recorded process groups whose leader is
 * still the recorded process, and any process carrying this sandbox's unique marker in its
 * environment (the extension host, its kernels, Chromium's helpers, even if they left the group).
 */
export function sandboxProcesses(
  record: Pick<SandboxRecord, 'id' | 'pgids' | 'pids' | 'starts'>,
  exclude: number[] = [process.pid],
): ProcInfo[] {
  const procs = listProcs();
  const pids = new Set(record.pids);
  const liveGroups = new Set(record.pgids.filter((g) => isRecordedProcess(record, g)));
  return procs.filter(
    (p) =>
      !exclude.includes(p.pid) &&
      ((pids.has(p.pid) && record.starts[String(p.pid)] === p.start) ||
        liveGroups.has(p.pgid) ||
        carriesMarker(p.pid, record.id)),
  );
}

export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------- records

/** True when the process that owns the sandbox (recorded launcherPid) still runs. */
export function ownerRunning(record: SandboxRecord): boolean {
  return record.launcherPid !== process.pid && isRecordedProcess(record, record.launcherPid);
}

export function addProcess(record: SandboxRecord, pid: number, group: boolean): void {
  const info = readProc(pid);
  if (!info) return;
  record.starts[String(pid)] = info.start;
  if (!record.pids.includes(pid)) record.pids.push(pid);
  if (group && !record.pgids.includes(info.pgid)) record.pgids.push(info.pgid);
}

export function recordPath(id: string): string {
  return path.join(STACK.recordsDir, `${id}.json`);
}

export function writeRecord(record: SandboxRecord): void {
  writeFileAtomic(recordPath(record.id), JSON.stringify(record, null, 2) + '\n');
}

export function readRecord(id: string): SandboxRecord | undefined {
  try {
    return JSON.parse(fs.readFileSync(recordPath(id), 'utf8')) as SandboxRecord;
  } catch {
    return undefined;
  }
}

export function listRecords(): SandboxRecord[] {
  if (!fs.existsSync(STACK.recordsDir)) return [];
  const names = fs.readdirSync(STACK.recordsDir).filter((n) => n.endsWith('.json'));
  const out: SandboxRecord[] = [];
  for (const name of names) {
    const record = readRecord(name.slice(0, -'.json'.length));
    if (record) out.push(record);
  }
  return out.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/** Copies a sandbox's logs to `$KEEP_LOGS/<id>/` (no browser profile, no extensions, no sockets). */
export function keepLogs(root: string, id: string): string | undefined {
  const keep = process.env['KEEP_LOGS'];
  if (!keep || !fs.existsSync(root)) return undefined;
  const dest = path.resolve(keep, id);
  const skip = new Set(['chrome', 'extensions']);
  fs.cpSync(root, dest, {
    recursive: true,
    filter: (src) => {
      const rel = path.relative(root, src).split(path.sep);
      if (skip.has(rel[0] ?? '') || rel.includes('node_modules') || rel.includes('CachedData')) return false;
      try {
        const st = fs.lstatSync(src);
        return st.isDirectory() || st.isFile();
      } catch {
        return false;
      }
    },
  });
  return dest;
}

/**
 * Where each sandbox gets its TMPDIR. Chromium and VS Code put Unix sockets there, whose paths
 * must fit in 108 bytes: under a deep checkout the sandbox root is too long for that.
 */
export const SHORT_TMP_PREFIX = path.join(fs.existsSync('/tmp') ? '/tmp' : os.tmpdir(), 'ab-');

/** Removes a sandbox's short TMPDIR (only ever one of ours). */
export function removeShortTmp(dir: string | undefined): void {
  if (dir?.startsWith(SHORT_TMP_PREFIX) && !dir.slice(SHORT_TMP_PREFIX.length).includes(path.sep)) removeTree(dir);
}

export function removeTree(dir: string): void {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
      return;
    } catch (err) {
      if (attempt === 4) throw err;
    }
  }
}

/** Removes a detached launcher's output file (copied to $KEEP_LOGS/<id>/launcher.log first when set). */
function removeLauncherLog(record: SandboxRecord): void {
  const log = record.logFile;
  if (!log || !log.startsWith(STACK.recordsDir + path.sep) || !fs.existsSync(log)) return;
  if (process.env['KEEP_LOGS']) {
    const dest = path.resolve(process.env['KEEP_LOGS'], record.id);
    fs.mkdirSync(dest, { recursive: true });
    fs.copyFileSync(log, path.join(dest, 'launcher.log'));
  }
  fs.rmSync(log, { force: true });
}

/** Removes the workspace copy sandbox-up made for this sandbox (only ever under STACK.workspacesDir). */
function removeOwnedWorkspace(record: SandboxRecord): void {
  const ws = record.info?.['ownedWorkspace'];
  if (typeof ws === 'string' && ws.startsWith(STACK.workspacesDir + path.sep)) fs.rmSync(ws, { recursive: true, force: true });
}

/**
 * Stops a sandbox from outside its owning process (sandbox-down, sandbox-cleanup): asks the owner
 * to stop (SIGTERM to the launcher, which then closes the browser and code-server cleanly), and if
 * it is gone or does not finish within `graceMs`, kills the sandbox's processes and removes its
 * root and record itself. Returns what it did.
 */
export async function stopRecorded(record: SandboxRecord, graceMs = 20_000): Promise<string> {
  const ownerAlive = ownerRunning(record);
  if (ownerAlive) {
    signal(record.launcherPid, 'SIGTERM');
    const end = Date.now() + graceMs;
    while (Date.now() < end && fs.existsSync(recordPath(record.id))) await sleep(200);
    if (!fs.existsSync(recordPath(record.id))) {
      removeOwnedWorkspace(record);
      removeLauncherLog(record);
      return `stopped ${record.id} (launcher ${record.launcherPid} shut it down)`;
    }
  }
  const found = sandboxProcesses(record);
  let leftovers = found;
  for (const p of leftovers) signal(p.pid, 'SIGTERM');
  for (let i = 0; i < 30 && leftovers.length; i++) {
    await sleep(100);
    leftovers = sandboxProcesses(record);
  }
  for (const p of leftovers) signal(p.pid, 'SIGKILL');
  const removedRoot = record.root.startsWith(STACK.runsDir + path.sep) && fs.existsSync(record.root);
  if (removedRoot) {
    keepLogs(record.root, record.id);
    removeTree(record.root);
  }
  removeShortTmp(record.tmp);
  removeLauncherLog(record);
  removeOwnedWorkspace(record);
  fs.rmSync(recordPath(record.id), { force: true });
  return (
    `${ownerAlive ? 'force-stopped' : 'cleaned up'} ${record.id}` +
    (found.length
      ? ` (stopped processes ${found.map((p) => p.pid).join(', ')}${leftovers.length ? `; SIGKILL for ${leftovers.map((p) => p.pid).join(', ')}` : ''})`
      : '') +
    (removedRoot ? `, removed ${path.relative(REPO_ROOT, record.root)}` : '')
  );
}
