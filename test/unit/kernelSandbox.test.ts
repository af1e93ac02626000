import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { sandboxedKernel } from '../../src/kernels/builtin/kernelSandbox';

const PYTHON = '/usr/bin/python3';
const bwrapArgs = (args: string[]) => args.slice(args.indexOf('bwrap') + 1);

describe('the builtin kernel in a bubblewrap sandbox (kernelSandbox.ts)', () => {
  it('where bubblewrap cannot run, the kernel command fails at once with the reason, and nothing runs unsandboxed', () => {
    const cmd = sandboxedKernel(
      [PYTHON, '-c', 'print("ran")'],
      { writable: ['/work'], home: '/root' },
      {
        ok: false,
        reason: 'bubblewrap (bwrap) is not installed',
      },
    );
    const r = spawnSync(cmd.command, cmd.args, { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /agentBridge\.kernel\.sandbox is on, but bubblewrap \(bwrap\) is not installed/);
  });

  it('no network, home hidden and read-only, workspace writable, python and the kernel script visible, SIGINT left to the kernel', () => {
    const cmd = sandboxedKernel(
      [PYTHON, '-u', '/home/p/.vscode/ext/dist/kernel.py', '3', '4'],
      {
        writable: ['/home/p/project'],
        home: '/home/p',
        cwd: '/home/p/project/nb',
      },
      { ok: true, detail: 'bubblewrap 0.8.0' },
    );
    assert.equal(cmd.command, '/bin/sh');
    assert.match(cmd.args[1] ?? '', /^trap "" INT; exec/);
    const args = bwrapArgs(cmd.args).join(' ');
    for (const part of [
      '--ro-bind / /',
      '--unshare-net',
      '--tmpfs /home/p',
      '--tmpfs /tmp',
      '--ro-bind /home/p/.vscode/ext/dist /home/p/.vscode/ext/dist',
      '--bind /home/p/project /home/p/project',
      '--remount-ro /home/p',
      '--setenv TMPDIR /tmp',
      '--chdir /home/p/project/nb',
    ])
      assert.ok(args.includes(part), `${part} missing from ${args}`);
    // The workspace is bound after the home is hidden, and the home made read-only after that.
    assert.ok(args.indexOf('--tmpfs /home/p') < args.indexOf('--bind /home/p/project'));
    assert.ok(args.indexOf('--bind /home/p/project') < args.indexOf('--remount-ro /home/p'));
    assert.ok(args.endsWith('-u /home/p/.vscode/ext/dist/kernel.py 3 4'), args);
  });

  it('a workspace that holds the home folder keeps it visible and writable', () => {
    const cmd = sandboxedKernel([PYTHON, '-c', 'pass'], { writable: ['/home'], home: '/home/p' }, { ok: true, detail: '' });
    const args = bwrapArgs(cmd.args).join(' ');
    assert.ok(!args.includes('--tmpfs /home/p'), args);
    assert.ok(!args.includes('--remount-ro'), args);
  });

  it('a Python that does not run is refused with its error', () => {
    const cmd = sandboxedKernel(
      ['/nonexistent/python3', '-c', 'pass'],
      { writable: [], home: '/root' },
      { ok: true, detail: '' },
    );
    const r = spawnSync(cmd.command, cmd.args, { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /"\/nonexistent\/python3" did not run/);
  });
});
