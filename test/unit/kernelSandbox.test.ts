/**
 * The kernel sandbox with the real bubblewrap (`npm run setup` installs it): what code inside tries
 * and fails, what stays usable, and how a sandbox that cannot be made whole is refused, saying
 * which part is missing.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { spawnCommand, type KernelCommand } from '../../src/kernels/builtin/kernelCommand';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { checkSandbox, sandboxCommand, type SandboxLayout } from '../../src/kernels/builtin/kernelSandbox';
import { seccompProgram } from '../../src/kernels/builtin/seccompFilter';
import { collectRun, IPYTHON_PYTHON, SCRIPT } from './support/kernelRuns';
import { sleep } from '../../src/core/sleep';

/** Runs a command to its end; its stdout and stderr. */
function runToEnd(command: KernelCommand): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawnCommand(command, { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    const [, out, err] = child.stdio as unknown as [null, Readable, Readable];
    let stdout = '';
    let stderr = '';
    out.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    err.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** What the check with bubblewrap `program` says is missing ('' when it can make the whole sandbox). */
function missing(program: string): { part: string; reason: string } {
  const check = checkSandbox(program);
  return check.ok ? { part: '', reason: '' } : check;
}

/** An executable shell script: a launcher, or a fake bubblewrap (named so where used). */
function script(file: string, body: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

describe('the builtin kernel in a bubblewrap sandbox (kernelSandbox.ts)', function () {
  this.timeout(20_000);
  let root: string;
  let layout: SandboxLayout;
  const run = async (code: string, more: Partial<SandboxLayout> = {}, python = IPYTHON_PYTHON, env = process.env) =>
    runToEnd(sandboxCommand([python, '-c', code], env, { ...layout, ...more }).command);

  before(() => {
    const check = checkSandbox();
    assert.ok(check.ok, `bubblewrap must make the whole sandbox here (npm run setup installs it): ${!check.ok && check.reason}`);
  });
  beforeEach(() => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-sandbox-')));
    fs.mkdirSync(path.join(root, 'home', 'p', '.ssh'), { recursive: true });
    fs.writeFileSync(path.join(root, 'home', 'p', '.ssh', 'id_rsa'), 'secret');
    fs.mkdirSync(path.join(root, 'ws', 'nb'), { recursive: true });
    layout = { writable: [path.join(root, 'ws')], home: path.join(root, 'home', 'p'), cwd: path.join(root, 'ws', 'nb') };
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('the kernel runs, answers host calls and is interrupted through the sandbox; the host is out of its reach', async () => {
    const listening = path.join(root, 'ws', 'host.sock');
    let connections = 0;
    const server = net.createServer(() => connections++);
    await new Promise<void>((resolve) => server.listen(listening, resolve));
    const kernel = new KernelProcess({
      python: IPYTHON_PYTHON,
      script: SCRIPT,
      env: { ...process.env, AGENT_BRIDGE_IPYTHON: '0', VSCODE_IPC_HOOK_CLI: '/run/user/0/vscode.sock', HOST_SECRET: 'x' },
      wrap: (argv, env) => sandboxCommand(argv, env, layout).command,
      onCall: async (method, params) => ({ method, params }),
    });
    try {
      const probe = await collectRun(
        kernel,
        [
          'import os, socket, json, _agent_bridge_host as host',
          'print("pid", os.getpid())',
          'try:',
          `    os.kill(${process.pid}, 0); print("kill allowed")`,
          'except OSError as e:',
          '    print("kill", type(e).__name__)',
          'print("procs", len([p for p in os.listdir("/proc") if p.isdigit()]))',
          'try:',
          `    socket.socket(socket.AF_UNIX).connect(${JSON.stringify(listening)}); print("connected")`,
          'except OSError as e:',
          '    print("unix", type(e).__name__)',
          'print("env", " ".join(sorted(os.environ)))',
          `print("home", os.listdir(${JSON.stringify(layout.home)}))`,
          'print("call", json.dumps(host.call("echo", [1])))',
        ].join('\n'),
      );
      assert.equal(probe.stderr, '');
      const said = Object.fromEntries(
        probe.stdout
          .trim()
          .split('\n')
          .map((l) => [l.split(' ')[0], l.slice(l.indexOf(' ') + 1)]),
      );
      assert.equal(said['pid'], '2', 'the kernel is the second process of a pid namespace of its own');
      assert.equal(said['kill'], 'ProcessLookupError');
      assert.ok(Number(said['procs']) <= 3, `processes the sandbox sees: ${said['procs']}`);
      assert.equal(said['unix'], 'PermissionError', 'no Unix socket can be made');
      assert.equal(connections, 0);
      const env = said['env']?.split(' ') ?? [];
      assert.deepEqual(
        env.filter((k) => k.startsWith('VSCODE_') || k === 'HOST_SECRET'),
        [],
        `the host's variables are dropped: ${env.join(' ')}`,
      );
      for (const kept of ['PATH', 'HOME', 'TMPDIR', 'MPLBACKEND', 'AGENT_BRIDGE_IPYTHON'])
        assert.ok(env.includes(kept), `${kept} is kept`);
      assert.equal(said['home'], '[]', 'the home folder is empty');
      assert.equal(said['call'], '{"method": "echo", "params": [1]}');

      const loop = collectRun(kernel, 'import time\nwhile True:\n    time.sleep(0.05)');
      await sleep(500);
      assert.equal(await kernel.interrupt(), 'sigint', 'SIGINT reaches the kernel in its own session');
      assert.equal((await loop).errors[0]?.name, 'KeyboardInterrupt');
      assert.equal((await collectRun(kernel, 'print("alive")')).stdout, 'alive\n');
    } finally {
      kernel.dispose();
      server.close();
    }
  });

  it('the workspace is writable but for the Python in it and .git, .vscode and .envrc; the home folder is hidden', async () => {
    const ws = path.join(root, 'ws');
    const venv = path.join(ws, '.venv');
    assert.equal(spawnSync(IPYTHON_PYTHON, ['-m', 'venv', '--without-pip', venv]).status, 0);
    for (const dir of ['.git/hooks', '.vscode', 'sub/.git']) fs.mkdirSync(path.join(ws, dir), { recursive: true });
    fs.writeFileSync(path.join(ws, '.envrc'), '');
    const targets = ['notes.txt', '.venv/lib/zz.pth', '.git/hooks/pre-commit', '.vscode/tasks.json', '.envrc', 'sub/.git/config'];
    const code = [
      'import os, sys',
      'print(sys.prefix)',
      `for t in ${JSON.stringify(targets)}:`,
      '    try:',
      '        open(t, "a").write("x"); print(t, "written")',
      '    except OSError as e:',
      '        print(t, e.strerror)',
      `print(os.path.exists(${JSON.stringify(path.join(root, 'home', 'p', '.ssh'))}))`,
    ].join('\n');
    const r = await run(code, { cwd: ws }, path.join(venv, 'bin', 'python'));
    assert.equal(r.stderr, '');
    assert.deepEqual(r.stdout.trim().split('\n'), [
      venv,
      'notes.txt written',
      '.venv/lib/zz.pth Read-only file system',
      '.git/hooks/pre-commit Read-only file system',
      '.vscode/tasks.json Read-only file system',
      '.envrc Read-only file system',
      'sub/.git/config Read-only file system',
      'False',
    ]);
    assert.equal(fs.readFileSync(path.join(ws, 'notes.txt'), 'utf8'), 'x', 'the host sees the write');
  });

  it('a Python whose prefix holds a workspace folder is refused, saying why', async () => {
    const ws = path.join(root, 'ws');
    assert.equal(spawnSync(IPYTHON_PYTHON, ['-m', 'venv', '--without-pip', ws]).status, 0);
    const sandboxed = sandboxCommand([path.join(ws, 'bin', 'python'), '-c', 'print("ran")'], process.env, layout);
    assert.equal(!sandboxed.check.ok && sandboxed.check.part, 'Python refused');
    const r = await runToEnd(sandboxed.command);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`is the writable workspace folder ${ws}.*The kernel does not run unsandboxed`));
  });

  it('a launcher script is asked for its interpreter inside a sandbox; one that names no interpreter is refused, its words not repeated', async () => {
    const launcher = script(path.join(root, 'bin', 'python3'), `exec ${IPYTHON_PYTHON} "$@"`);
    const found = sandboxCommand([launcher, '-c', 'pass'], process.env, layout);
    assert.ok(found.check.ok);
    assert.equal(
      found.command.args[found.command.args.indexOf('--') + 1],
      IPYTHON_PYTHON,
      'the interpreter it starts runs, not the launcher',
    );
    const marker = path.join(root, 'launcher-ran-outside');
    const liar = script(path.join(root, 'liar', 'python3'), `touch ${marker} 2>/dev/null; echo ${path.join(root, 'home', 'p')}`);
    const refused = sandboxCommand([liar, '-c', 'pass'], process.env, layout);
    assert.equal(!refused.check.ok && refused.check.part, 'Python refused');
    const r = await runToEnd(refused.command);
    assert.match(r.stderr, /is a launcher script .* did not name an interpreter/);
    assert.doesNotMatch(r.stderr, /home\/p/, 'what the launcher said is not repeated');
    assert.ok(!fs.existsSync(marker), 'the launcher wrote outside the sandbox');
  });

  it('where a part cannot be made, the check names it: no user namespaces (a real bubblewrap inside one that forbids them)', () => {
    const nested = script(
      path.join(root, 'nested', 'bwrap'),
      'exec bwrap --unshare-user --disable-userns --ro-bind / / --dev /dev --proc /proc -- bwrap "$@"',
    );
    const { part, reason } = missing(nested);
    assert.equal(part, 'no user namespace', reason);
    assert.match(reason, /bubblewrap cannot make a sandbox with the user namespace: "bwrap: .+"/);
  });

  it('where a part cannot be made, the check names it: an old bubblewrap (a fake that refuses --disable-userns as 0.7 does), none at all', () => {
    const old = script(
      path.join(root, 'old', 'bwrap'),
      'for a in "$@"; do [ "$a" = --disable-userns ] && { echo "bwrap: Unknown option --disable-userns" >&2; exit 1; }; done\nexec bwrap "$@"',
    );
    const { part, reason } = missing(old);
    assert.equal(part, 'no --disable-userns (bubblewrap 0.8 or newer)', reason);
    assert.match(reason, /Unknown option --disable-userns/);
    const none = missing(path.join(root, 'nowhere', 'bwrap'));
    assert.equal(none.part, 'no bubblewrap');
    assert.match(none.reason, /not installed/);
  });

  it('a sandbox that cannot be made runs nothing: the command fails at once with the reason', async () => {
    const sandboxed = sandboxCommand([IPYTHON_PYTHON, '-c', 'print("ran")'], process.env, layout, {
      ok: false,
      part: 'no user namespace',
      reason: 'bubblewrap cannot make a sandbox with the user namespace: "bwrap: No permissions"',
    });
    const r = await runToEnd(sandboxed.command);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /agentBridge\.kernel\.sandbox is on, but bubblewrap cannot make a sandbox with the user namespace/);
  });

  it('its arguments: every namespace, a new session, the socket folders hidden, mounts in order, the seccomp program on its descriptor', () => {
    // A home outside /tmp, as most are (this test's lies in /tmp).
    const { command } = sandboxCommand([IPYTHON_PYTHON, '-u', SCRIPT, '3', '4'], process.env, {
      ...layout,
      home: '/home/p',
      runtimeDir: '/run/user/1000',
    });
    const args = command.args.join(' ');
    for (const part of [
      '--unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --new-session --die-with-parent --disable-userns --cap-drop ALL',
      '--ro-bind / / --dev /dev --proc /proc',
      '--tmpfs /home/p',
      '--tmpfs /run',
      '--tmpfs /tmp',
      '--tmpfs /var/tmp',
      `--bind ${layout.writable[0]} ${layout.writable[0]}`,
      '--remount-ro /home/p',
      '--remount-ro /run',
      `--chdir ${layout.cwd}`,
      `--seccomp 9 -- ${IPYTHON_PYTHON} -u ${SCRIPT} 3 4`,
    ])
      assert.ok(args.includes(part), `${part} missing from ${args}`);
    assert.ok(
      args.indexOf('--tmpfs /run ') < args.indexOf('--tmpfs /run/user/1000'),
      'the runtime folder: empty, on the empty /run',
    );
    assert.ok(
      args.indexOf('--tmpfs /tmp') < args.indexOf(`--bind ${layout.writable[0]}`),
      'the workspace under /tmp comes back after',
    );
    assert.equal(command.feed?.fd, 9);
    assert.deepEqual(command.feed?.bytes, seccompProgram());
  });
});

describe('the seccomp program (seccompFilter.ts)', () => {
  it('exists for x64 and arm64 only, as whole struct sock_filter entries ending in its three returns', () => {
    assert.equal(seccompProgram('ia32'), undefined);
    for (const arch of ['x64', 'arm64']) {
      const program = seccompProgram(arch)!;
      assert.equal(program.length % 8, 0);
      const last = (i: number) => program.readUInt32LE(program.length - 8 * i + 4);
      assert.deepEqual([last(3), last(2), last(1)], [0x7fff0000, 0x00050001, 0x80000000], `${arch}: allow, EPERM, kill`);
    }
  });
});
