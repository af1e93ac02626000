/**
 * The builtin kernel under bubblewrap (agentBridge.kernel.sandbox), turned on and off as the
 * person would, in the Settings editor (an agent cannot: the setting is machine-scoped, no workspace file sets it). On
 * other.ipynb's kernel: the network is gone (not even the bridge's own loopback port answers),
 * the home folder is hidden and unwritable, the workspace reads and writes, pandas imports, and an
 * interrupt still stops a loop without killing the kernel. What an attacker inside would try next
 * fails too: the host's processes (signals, /proc), its Unix sockets, its environment, and files
 * the bridge itself runs outside the sandbox (a virtualenv's .pth, the code check's Python).
 * Where bubblewrap cannot run on this machine, every check is reported pending, by name, with
 * bubblewrap's own words.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { checkSandbox } from '../../src/kernels/builtin/kernelSandbox';
import { eq, includes, ok, show } from '../assert';
import { screenshot } from '../screenshots';
import { setBoolean, setText } from '../settingsEditor';
import { checkRun, skipped, suiteState } from './context';
import { sleep } from '../../src/core/sleep';
import { MARKER_VAR } from '../stack';
import { listProcs, signal as sendSignal } from '../records';

const NAMES = {
  on: 'kernel sandbox: turned on in the Settings editor, the status bar says so and the kernel restarts under bubblewrap',
  network: "kernel sandbox: a socket connect fails, even to the bridge's own port on 127.0.0.1",
  home: "kernel sandbox: a write to the home folder fails and the home folder shows nothing of the person's",
  workspace: 'kernel sandbox: the workspace reads and writes (the host sees the file); pandas imports',
  processes: "kernel sandbox: os.kill(<extension host pid>, 0) fails, and /proc lists only the sandbox's own processes",
  procRoot: 'kernel sandbox: /proc/<extension host pid>/root is not reachable',
  sockets:
    'kernel sandbox: a Unix socket the host listens on outside /tmp and the home folder, or in the workspace, cannot be connected to',
  environment: "kernel sandbox: the kernel's environment holds no VSCODE_* variable and none the harness put in the host's",
  interrupt: 'kernel sandbox: an interrupt stops a loop and the kernel lives on',
  pth: 'kernel sandbox: a .pth file planted in the virtualenv the kernel runs, then a restart, runs nothing on the host',
  codeCheck:
    'kernel sandbox: the code check of a notebook whose kernel is not running runs sandboxed too (seen through a marker)',
  riskScan:
    'kernel sandbox: the risk scan runs sandboxed too (its process under bubblewrap, in a network namespace of its own) and still finds subprocess.run',
  refused:
    "kernel sandbox: a Python whose prefix holds the workspace folder does not start; the run's error and the status bar say why",
  off: 'kernel sandbox: turned off again, the kernel runs with the network back',
} as const;

const SETTING = 'agentBridge.kernel.sandbox';
const PYTHON_PATH = 'agentBridge.pythonPath';
/** A Python string literal of `text` (JSON's escapes are Python's too). */
const py = (text: string) => JSON.stringify(text);
/** The interpreter the virtualenv is made from: Debian's, with pandas, as setup installs it. */
const SYSTEM_PYTHON = '/usr/bin/python3';

/** A process's command line, its arguments NUL-separated ('' once it is gone). */
const cmdline = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};
const parentOf = (pid: number) => {
  try {
    // "pid (comm) state ppid ...": the name may hold spaces and parentheses, so from the last ')'.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? 0);
  } catch {
    return 0;
  }
};
/** Every process below `root`, as /proc shows them now. */
function descendants(root: number): number[] {
  const pids = fs
    .readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .map(Number);
  const below = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const pid of pids) if (!below.has(pid) && below.has(parentOf(pid))) grew = below.add(pid).size > 0;
  }
  below.delete(root);
  return [...below];
}
/** `pid`, its parent, and so on up to (not including) `root`. */
function ancestors(pid: number, root: number): number[] {
  const chain: number[] = [];
  for (let p = pid; p > 1 && p !== root && chain.length < 50; p = parentOf(p)) chain.push(p);
  return chain;
}

/** The `kernel sandbox` suite's checks. */
export function kernelSandboxChecks(): void {
  const check = checkSandbox();
  if (!check.ok) return skipped(Object.values(NAMES), check.reason);
  const ctx = suiteState((c) => ({ sid: c.other.session.id }));
  const run = async (code: string, signal: AbortSignal, timeoutMs = 30_000) => {
    const r = await ctx.client.run(ctx.sid, code, { signal, timeoutMs });
    eq(r.status, 200, `execute status (${show(r.raw, 300)})`);
    return r;
  };
  const restart = async (signal: AbortSignal) => {
    const r = await ctx.client.post('/notebooks/restart', { notebook: ctx.sid }, { signal, timeoutMs: 30_000 });
    eq(r.status, 200, `POST /notebooks/restart (${show(r.text, 300)})`);
  };
  /** Restarts the kernel until `probe` prints something `done` takes (VS Code hands a changed setting over a moment later). */
  const restartUntil = async (probe: string, done: (seen: string) => boolean, signal: AbortSignal, note: (m: string) => void) => {
    let seen = '';
    for (const t0 = Date.now(); Date.now() < t0 + 30_000; await sleep(500)) {
      await restart(signal);
      const r = await ctx.client.run(ctx.sid, probe, { signal, timeoutMs: 30_000 });
      seen = r.status === 200 ? r.stdout.trim() : `${r.status} ${show(r.raw, 300)}`;
      note(`after ${Date.now() - t0} ms the kernel says ${show(seen, 300)}`);
      if (done(seen)) return;
    }
    ok(false, `the kernel never said what was awaited (it said ${show(seen, 500)})`);
  };
  const tmpdir = 'import os\nprint(os.environ.get("TMPDIR"))';
  const sandboxed = (seen: string) => seen === '/tmp';
  /** The extension host's pid, as the discovery file gives it. */
  const hostPid = () => ctx.advert.pid;
  /** The virtualenv in the workspace that the Python checks make the kernel's Python. */
  const venv = () => path.join(ctx.workspace, '.venv');
  /** Sets agentBridge.pythonPath in the Settings editor; the editor as it was is saved when that fails. */
  const setPython = (value: string, note: (m: string) => void) =>
    setText(ctx.sandbox.page, ctx.sandbox.dirs.userData, PYTHON_PATH, value).catch(async (e: unknown) => {
      await screenshot(ctx.sandbox.page, 'kernel-sandbox-python-setting.png', note);
      throw e;
    });
  const sitePackages = () => {
    const lib = path.join(venv(), 'lib');
    const version = fs.readdirSync(lib).find((d) => d.startsWith('python'));
    return path.join(lib, version ?? 'python3', 'site-packages');
  };

  it(NAMES.on, async () => {
    const { signal, note } = checkRun();
    const shot = () => screenshot(ctx.sandbox.page, 'kernel-sandbox-setting.png', note);
    await setBoolean(ctx.sandbox.page, ctx.sandbox.dirs.userData, SETTING, true, shot);
    const item = ctx.sandbox.page.locator('.statusbar-item', { hasText: 'Kernel sandbox' }).first();
    await item.waitFor({ state: 'visible', timeout: 20_000 });
    await screenshot(ctx.sandbox.page, 'kernel-sandbox-on.png', note);
    await restartUntil(tmpdir, sandboxed, signal, note);
  }).timeout(90_000);

  it(NAMES.network, async () => {
    const { signal } = checkRun();
    const code = `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${ctx.advert.port}), timeout=3)\n    print("connected")\nexcept OSError as e:\n    print("refused:", e)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'refused:', 'the connect');
  });

  it(NAMES.home, async () => {
    const { signal } = checkRun();
    const code = `import os\nhome = os.path.expanduser("~")\nprint(home, sorted(os.listdir(home)))\ntry:\n    open(os.path.join(home, "agent-was-here"), "w").write("x")\n    print("written")\nexcept OSError as e:\n    print("write failed:", e.strerror)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'write failed:', 'the write to home');
    includes(out, `${ctx.sandbox.dirs.home} []`, 'the home listing');
    ok(!fs.existsSync(path.join(ctx.sandbox.dirs.home, 'agent-was-here')), 'the file reached the real home folder');
  });

  it(NAMES.workspace, async () => {
    const { signal } = checkRun();
    const file = path.join(ctx.workspace, 'sandbox-probe.txt');
    const code = `import pandas\np = ${JSON.stringify(file)}\nopen(p, "w").write("from the sandbox")\nprint(open(p).read(), pandas.__name__)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'from the sandbox pandas', 'the kernel reads back its file and imports pandas');
    eq(fs.readFileSync(file, 'utf8'), 'from the sandbox', 'the file as the host sees it');
    fs.rmSync(file);
  });

  it(NAMES.processes, async () => {
    const { signal } = checkRun();
    const code = [
      'import os',
      'try:',
      `    os.kill(${hostPid()}, 0)`,
      '    print("kill: allowed")',
      'except OSError as e:',
      '    print("kill:", type(e).__name__)',
      'for p in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):',
      '    try:',
      '        print("proc:", p, os.path.basename(open("/proc/%d/cmdline" % p).read().split("\\0")[0]))',
      '    except OSError:',
      '        pass',
    ].join('\n');
    const out = (await run(code, signal)).stdout;
    includes(out, 'kill: ProcessLookupError', 'os.kill of the extension host');
    const procs = out.split('\n').filter((l) => l.startsWith('proc: '));
    ok(procs.length > 0 && procs.length <= 4, `the sandbox lists ${procs.length} processes:\n${procs.join('\n')}`);
    const foreign = procs.filter((l) => !/^proc: \d+ (bwrap|python[\d.]*)$/.test(l));
    eq(foreign.join('\n'), '', 'processes in /proc that are neither the sandbox (bwrap) nor its kernel');
  });

  it(NAMES.procRoot, async () => {
    const { signal } = checkRun();
    const code = `import os\ntry:\n    print("root:", len(os.listdir("/proc/${hostPid()}/root")), "entries")\nexcept OSError as e:\n    print("root:", type(e).__name__)`;
    const out = (await run(code, signal)).stdout;
    ok(/^root: [A-Za-z]+Error$/m.test(out), `the extension host's /proc/<pid>/root from inside: ${show(out, 300)}`);
  });

  it(NAMES.sockets, async () => {
    const { signal, note } = checkRun();
    // One beside the sandbox's folders (neither /tmp nor the home folder), one in the workspace, which the kernel sees.
    const places = [path.join(ctx.sandbox.root, 'host-check.sock'), path.join(ctx.workspace, 'host-check.sock')];
    let connections = 0;
    const servers = await Promise.all(
      places.map(
        (place) =>
          new Promise<net.Server>((resolve, reject) => {
            fs.rmSync(place, { force: true });
            const server = net.createServer((socket) => {
              connections++;
              socket.end('hello from the host\n');
            });
            server.once('error', reject);
            server.listen(place, () => resolve(server));
          }),
      ),
    );
    try {
      const code = [
        'import socket',
        `for p in ${JSON.stringify(places)}:`,
        '    try:',
        '        s = socket.socket(socket.AF_UNIX)',
        '        s.settimeout(3)',
        '        s.connect(p)',
        '        print("connected:", p, s.recv(100))',
        '    except OSError as e:',
        '        print("failed:", p, type(e).__name__, e)',
      ].join('\n');
      const out = (await run(code, signal)).stdout;
      note(out);
      eq(out.split('\n').filter((l) => l.startsWith('failed: ')).length, places.length, `every connect fails: ${show(out, 600)}`);
      eq(connections, 0, 'connections the host accepted');
    } finally {
      for (const server of servers) server.close();
      for (const place of places) fs.rmSync(place, { force: true });
    }
  });

  it(NAMES.environment, async () => {
    const { signal } = checkRun();
    const names = (await run('import os, json\nprint(json.dumps(sorted(os.environ)))', signal)).stdout;
    const env = JSON.parse(names) as string[];
    const leaked = env.filter((k) => k.startsWith('VSCODE_') || k === MARKER_VAR || k === 'AGENT_BRIDGE_DISCOVERY_FILE');
    eq(leaked.join(' '), '', `host variables in the kernel's environment (it holds: ${env.join(' ')})`);
    ok(env.includes('PATH') && env.includes('HOME'), `PATH and HOME are kept: ${env.join(' ')}`);
  });

  it(NAMES.interrupt, async () => {
    const { signal } = checkRun();
    const loop = ctx.client.run(ctx.sid, 'import time\nwhile True:\n    time.sleep(0.05)', { signal, timeoutMs: 30_000 });
    await sleep(1500);
    const r = await ctx.client.post('/notebooks/interrupt', { notebook: ctx.sid }, { signal, timeoutMs: 10_000 });
    eq(r.status, 200, `POST /notebooks/interrupt (${show(r.text, 300)})`);
    includes((await loop).stderr, 'KeyboardInterrupt', 'the loop ends with');
    includes((await run('print("still here")', signal)).stdout, 'still here', 'the next run');
  });

  it(NAMES.pth, async () => {
    const { signal, note } = checkRun();
    const made = spawnSync(SYSTEM_PYTHON, ['-m', 'venv', '--system-site-packages', '--without-pip', venv()], {
      encoding: 'utf8',
    });
    eq(made.status, 0, `making the virtualenv: ${made.stderr}`);
    await setPython(path.join(venv(), 'bin', 'python'), note);
    await restartUntil('import sys\nprint(sys.prefix)', (seen) => seen === venv(), signal, note);
    // Where the plant would write on the host: outside the sandbox's writable folders.
    const marker = path.join(ctx.sandbox.root, 'pth-ran-on-host');
    fs.rmSync(marker, { force: true });
    const line = `import os; os.access(${py(ctx.sandbox.root)}, os.W_OK) and open(${py(marker)}, "a").write("ran in %d\\n" % os.getpid())\n`;
    const plant = [
      'import os',
      'try:',
      `    open(os.path.join(${py(sitePackages())}, "zz_agent_plant.pth"), "w").write(${py(line)})`,
      '    print("planted")',
      'except OSError as e:',
      '    print("plant refused:", e.strerror)',
    ].join('\n');
    note(`from inside: ${(await run(plant, signal)).stdout.trim()}`);
    // As if planted before the sandbox was on (or by a kernel that ran without it).
    fs.writeFileSync(path.join(sitePackages(), 'zz_earlier_plant.pth'), line);
    try {
      await restart(signal);
      includes((await run('print("restarted")', signal)).stdout, 'restarted', 'the run after the restart');
      await sleep(1000);
      ok(!fs.existsSync(marker), `a .pth ran on the host: ${fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : ''}`);
    } finally {
      for (const f of ['zz_agent_plant.pth', 'zz_earlier_plant.pth']) fs.rmSync(path.join(sitePackages(), f), { force: true });
    }
  }).timeout(120_000);

  it(NAMES.codeCheck, async () => {
    const { signal, note } = checkRun();
    // The code check of a notebook without a running kernel is `python kernel_inspect.py --serve`
    // with the kernel's Python: the virtualenv's, whose .pth says where it ran. The bridge keeps
    // that process between checks: one an earlier check left is ended first (as if it died), so
    // the one started again reads the .pth.
    const marker = path.join(ctx.workspace, 'code-check-ran');
    fs.rmSync(marker, { force: true });
    const kept = listProcs().filter((p) => p.ppid === hostPid() && p.cmdline.includes('kernel_inspect.py'));
    note(`kept code checks ended first: ${kept.map((p) => p.pid).join(', ') || 'none'}`);
    for (const p of kept) sendSignal(p.pid, 'SIGKILL');
    const probe = `import os; "kernel_inspect" in open("/proc/self/cmdline").read() and open(${py(marker)}, "a").write("pid %d, extension host visible: %s\\n" % (os.getpid(), os.path.exists("/proc/${hostPid()}")))\n`;
    fs.writeFileSync(path.join(sitePackages(), 'zz_code_check_probe.pth'), probe);
    const file = path.join(ctx.workspace, 'sandbox-code-check.ipynb');
    const cell = { cell_type: 'code', metadata: {}, source: ['first = 1'], outputs: [], execution_count: null };
    fs.writeFileSync(file, JSON.stringify({ cells: [cell], metadata: {}, nbformat: 4, nbformat_minor: 5 }));
    try {
      const opened = await ctx.client.post('/notebooks/open', { path: file }, { signal, timeoutMs: 30_000 });
      eq(opened.status, 200, `POST /notebooks/open (${show(opened.text, 300)})`);
      const created = await ctx.client.post(
        '/notebooks/cells',
        { notebook: file, code: `second = first + ${'undefined_name'}` },
        { signal, timeoutMs: 30_000 },
      );
      eq(created.status, 201, `POST /notebooks/cells (${show(created.text, 300)})`);
      includes(created.text, 'undefined_name', 'the code check warned about the undefined name');
      ok(fs.existsSync(marker), 'the code check ran no Python with the virtualenv (no marker)');
      const ran = fs.readFileSync(marker, 'utf8');
      note(ran);
      for (const l of ran.trim().split('\n'))
        eq(l, 'pid 2, extension host visible: False', 'the code check ran in a pid namespace of its own');
    } finally {
      fs.rmSync(path.join(sitePackages(), 'zz_code_check_probe.pth'), { force: true });
      fs.rmSync(marker, { force: true });
    }
  }).timeout(90_000);

  it(NAMES.riskScan, async () => {
    const { signal, note } = checkRun();
    // A scan only (dryRun): the scan's process starts (again) with the sandbox on.
    const dry = await ctx.client.post(
      '/api/kernel/execute',
      { code: 'import subprocess\nsubprocess.run(["true"])', dryRun: true },
      { headers: { 'marimo-session-id': ctx.sid }, signal, timeoutMs: 30_000 },
    );
    eq(dry.status, 200, `dryRun (${show(dry.text, 300)})`);
    const findings = (JSON.parse(dry.text) as { risk: { findings: { pattern: string; kind: string }[] } }).risk.findings;
    note(`findings: ${show(JSON.stringify(findings), 400)}`);
    eq(findings[0]?.pattern, 'subprocess.run', 'the sandboxed scan read the code');
    const program = (pid: number) => path.basename(cmdline(pid).split('\0')[0] ?? '');
    // The Python reading risk_scan.py (bubblewrap's own processes name it among their arguments too).
    const scans = descendants(hostPid()).filter((pid) => cmdline(pid).includes('risk_scan.py') && program(pid) !== 'bwrap');
    eq(scans.length, 1, `risk_scan.py Pythons under the extension host (${scans.map(program).join(', ')})`);
    const [scan] = scans as [number];
    const chain = ancestors(scan, hostPid()).map(program);
    note(`risk_scan.py is pid ${scan}; from it up to the extension host: ${chain.join(' ← ')}`);
    ok(chain.includes('bwrap'), `the risk scan runs under bubblewrap (${chain.join(' ← ')})`);
    const netns = (pid: number) => fs.readlinkSync(`/proc/${pid}/ns/net`);
    ok(netns(scan) !== netns(hostPid()), `the risk scan has a network namespace of its own (${netns(scan)})`);
  });

  it(NAMES.refused, async () => {
    const { signal, note } = checkRun();
    // A virtualenv made in the workspace folder itself: a sandboxed run could change that Python.
    const made = spawnSync(SYSTEM_PYTHON, ['-m', 'venv', '--without-pip', ctx.workspace], { encoding: 'utf8' });
    eq(made.status, 0, `making the virtualenv: ${made.stderr}`);
    const venvFiles = ['bin', 'include', 'lib', 'lib64', 'pyvenv.cfg'].map((f) => path.join(ctx.workspace, f));
    try {
      await setPython(path.join(ctx.workspace, 'bin', 'python'), note);
      let said = '';
      for (const t0 = Date.now(); Date.now() < t0 + 30_000 && !said.includes('writable workspace folder'); await sleep(500)) {
        await ctx.client.post('/notebooks/restart', { notebook: ctx.sid }, { signal, timeoutMs: 30_000 });
        const r = await ctx.client.run(ctx.sid, 'print("ran")', { signal, timeoutMs: 30_000 });
        said = `${r.stdout}${r.stderr}`;
      }
      note(said);
      includes(said, `is the writable workspace folder ${ctx.workspace}`, "the run's error");
      ok(!said.includes('ran\n'), 'the code ran');
      const item = ctx.sandbox.page.locator('.statusbar-item', { hasText: 'Kernel sandbox: Python refused' }).first();
      await item.waitFor({ state: 'visible', timeout: 10_000 });
      await item.hover();
      await ctx.sandbox.page
        .locator('.monaco-hover', { hasText: 'is the writable workspace folder' })
        .first()
        .waitFor({ timeout: 10_000 });
      await screenshot(ctx.sandbox.page, 'kernel-sandbox-refused.png', note);
    } finally {
      for (const f of venvFiles) fs.rmSync(f, { recursive: true, force: true });
      // Away from the status bar: its hover would keep the command palette from opening.
      await ctx.sandbox.page.mouse.move(600, 300);
      await ctx.sandbox.page.keyboard.press('Escape');
      await setPython('', note);
    }
  }).timeout(120_000);

  it(NAMES.off, async () => {
    const { signal, note } = checkRun();
    await setPython('', note);
    fs.rmSync(venv(), { recursive: true, force: true });
    await setBoolean(ctx.sandbox.page, ctx.sandbox.dirs.userData, SETTING, false);
    await ctx.sandbox.page
      .locator('.statusbar-item', { hasText: 'Kernel sandbox' })
      .first()
      .waitFor({ state: 'hidden', timeout: 20_000 });
    await restartUntil(tmpdir, (seen) => !sandboxed(seen), signal, note);
    const code = `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${ctx.advert.port}), timeout=3).close()\n    print("connected")\nexcept OSError as e:\n    print("refused:", e)`;
    includes((await run(code, signal)).stdout, 'connected', 'the connect after the sandbox is off');
  }).timeout(90_000);
}
