/**
 * A Python program as it is started: as it is, or wrapped in the sandbox (kernelSandbox.ts), which
 * brings its own environment, a program to hand bubblewrap on a file descriptor, and its own
 * process group for interrupts. The kernel (kernelChild.ts), the code check (pythonAnalyzer.ts)
 * and the risk scan (riskScanner.ts) all start theirs here.
 */
import { spawn, type ChildProcess, type SpawnOptions, type StdioPipe, type StdioNull } from 'node:child_process';
import type { Writable } from 'node:stream';

export interface KernelCommand {
  command: string;
  args: string[];
  /** The whole environment it runs with (the sandbox's allowlist); absent: the caller's. */
  env?: NodeJS.ProcessEnv;
  /** Written to file descriptor `fd` of the process as it starts, then closed (the seccomp program bubblewrap reads). */
  feed?: { fd: number; bytes: Buffer };
  /**
   * The process group an interrupt goes to, from the pid of what was spawned: the sandbox's own
   * session, one process below bubblewrap. Absent (or unknown): the spawned process's group.
   */
  interruptGroup?: (pid: number) => number | undefined;
}

type Stdio = StdioPipe | StdioNull;

/** Spawns `command` with `stdio` (extended with its feed's descriptor), and writes the feed. */
export function spawnCommand(
  command: KernelCommand,
  options: Omit<SpawnOptions, 'stdio' | 'env'> & { stdio: Stdio[]; env: NodeJS.ProcessEnv },
): ChildProcess {
  const stdio = [...options.stdio];
  const { feed } = command;
  if (feed) {
    while (stdio.length < feed.fd) stdio.push('ignore');
    stdio[feed.fd] = 'pipe';
  }
  const child = spawn(command.command, command.args, { ...options, stdio, env: command.env ?? options.env });
  if (feed) {
    const to = child.stdio[feed.fd] as Writable | null;
    to?.on('error', () => undefined); // a command that exits at once (a refusal) does not read it
    to?.end(feed.bytes);
  }
  return child;
}
