/**
 * The real, unmodified marimo-pair scripts against the bridge. They are never copied into this
 * repository: point MARIMO_PAIR_SCRIPTS at a folder holding discover-servers.sh and
 * execute-code.sh. Without it every check here is reported SKIP by name.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eq, includes, ok, show } from '../assert';
import { checkRun, skipped, callerEnv, suiteState } from './context';

export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export function runScript(
  file: string,
  args: string[],
  opts: { env: NodeJS.ProcessEnv; stdin?: string; timeoutMs?: number; signal?: AbortSignal },
): Promise<ScriptResult> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn('bash', [file, ...args], {
      env: opts.env,
      stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const kill = () => child.kill('SIGKILL');
    const timer = setTimeout(() => {
      kill();
      reject(
        new Error(
          `${path.basename(file)} ${args.join(' ')}: no exit within ${opts.timeoutMs ?? 10_000} ms (stderr ${show(stderr)})`,
        ),
      );
    }, opts.timeoutMs ?? 10_000);
    opts.signal?.addEventListener('abort', kill);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - t0 });
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined); // the script may exit before reading it all
      child.stdin.end(opts.stdin);
    }
  });
}

const NAMES = [
  'scripts: discover-servers.sh lists the bridge with its url',
  'scripts: execute-code.sh --file runs print(1) and exits 0',
  'scripts: execute-code.sh without --file asks for one (two sessions)',
  'scripts: execute-code.sh --file selects each notebook; an unknown path fails',
  'scripts: execute-code.sh exits 1 with the traceback on stderr',
  'scripts: execute-code.sh reads code from stdin (-)',
  'scripts: execute-code.sh reads code from a file argument',
  'scripts: execute-code.sh without the token fails to connect',
  'scripts: execute-code.sh printing 15 MB ends with head and tail on stdout; the whole output is at the URL its note gives',
  "scripts: a run silent for 6 s sends ': running 5 s' on its stream, which execute-code.sh skips: its output is the run's alone",
] as const;

/** The folder with marimo-pair's discover-servers.sh and execute-code.sh (MARIMO_PAIR_SCRIPTS), if given. */
export function scriptsDir(): string | undefined {
  const dir = process.env['MARIMO_PAIR_SCRIPTS'];
  return dir ? path.resolve(dir) : undefined;
}

/** The `scripts` suite's checks (reported pending by name, with the reason, without the scripts). */
export function scriptChecks(): void {
  const dir = scriptsDir();
  const missing = !dir
    ? 'MARIMO_PAIR_SCRIPTS is not set'
    : !fs.existsSync(path.join(dir, 'execute-code.sh')) || !fs.existsSync(path.join(dir, 'discover-servers.sh'))
      ? `no discover-servers.sh/execute-code.sh in ${dir}`
      : undefined;
  if (missing) return skipped(NAMES, missing);
  const discover = path.join(dir!, 'discover-servers.sh');
  const execute = path.join(dir!, 'execute-code.sh');
  const ctx = suiteState((c) => ({
    baseEnv: callerEnv(c.sandbox.dirs),
    withToken: callerEnv(c.sandbox.dirs, c.advert.token),
  }));
  const exec = (args: string[], signal: AbortSignal, opts: { stdin?: string; env?: NodeJS.ProcessEnv } = {}) =>
    runScript(execute, ['--url', ctx.advert.url, ...args], { env: opts.env ?? ctx.withToken, stdin: opts.stdin, signal });
  const summarize = (r: ScriptResult) => `exit ${r.code}, stdout ${show(r.stdout)}, stderr ${show(r.stderr, 300)}`;

  it(NAMES[0], async () => {
    const { signal } = checkRun();
    const r = await runScript(discover, [], { env: ctx.baseEnv, signal });
    eq(r.code, 0, `exit code (${summarize(r)})`);
    let list: { server_id: string; url: string | null }[];
    try {
      list = JSON.parse(r.stdout);
    } catch {
      throw new Error(`not JSON: ${show(r.stdout)}`);
    }
    const entry = list.find((e) => e.server_id === `127.0.0.1:${ctx.advert.port}`);
    ok(entry, `bridge 127.0.0.1:${ctx.advert.port} not listed: ${show(list, 300)}`);
    eq(entry.url, ctx.advert.url, 'url');
  });

  it(NAMES[1], async () => {
    const { signal } = checkRun();
    const r = await exec(['--file', ctx.analysis.path, '-c', 'print(1)'], signal);
    eq(r.code, 0, `exit code (${summarize(r)})`);
    ok(r.stdout.startsWith('1\n'), `stdout ${show(r.stdout)}`);
    eq(r.stderr, '', 'stderr');
  });

  it(NAMES[2], async () => {
    const { signal } = checkRun();
    const r = await exec(['-c', 'print(1)'], signal);
    eq(r.code, 1, `exit code (${summarize(r)})`);
    includes(r.stderr, '--file', 'stderr');
    ok(!r.stdout.includes('1'), `the code ran anyway: ${summarize(r)}`);
  });

  it(NAMES[3], async () => {
    const { signal } = checkRun();
    for (const nb of [ctx.analysis, ctx.other]) {
      const r = await exec(['--file', nb.path, '-c', `print(${JSON.stringify(nb.name)})`], signal);
      eq(r.code, 0, `--file ${nb.name}.ipynb exit code (${summarize(r)})`);
      ok(r.stdout.startsWith(`${nb.name}\n`), `--file ${nb.name}.ipynb stdout ${show(r.stdout)}`);
    }
    const nope = path.join(ctx.workspace, 'nope.ipynb');
    const r = await exec(['--file', nope, '-c', 'print(1)'], signal);
    eq(r.code, 1, `--file nope.ipynb exit code (${summarize(r)})`);
    includes(r.stderr, 'No active session matches', '--file nope.ipynb stderr');
    // The script lists the sessions it has: both fixtures, by path.
    includes(r.stderr, ctx.analysis.path, '--file nope.ipynb stderr');
    includes(r.stderr, ctx.other.path, '--file nope.ipynb stderr');
  });

  it(NAMES[4], async () => {
    const { signal } = checkRun();
    const r = await exec(['--file', ctx.analysis.path, '-c', "raise ValueError('boom')"], signal);
    eq(r.code, 1, `exit code (${summarize(r)})`);
    includes(r.stderr, 'Traceback', 'stderr');
    includes(r.stderr, 'ValueError: boom', 'stderr');
  });

  it(NAMES[5], async () => {
    const { signal } = checkRun();
    const r = await exec(['--file', ctx.other.path, '-'], signal, { stdin: 'print(3 * 3)\nprint("ü")\n' });
    eq(r.code, 0, `exit code (${summarize(r)})`);
    ok(r.stdout.startsWith('9\nü\n'), `stdout ${show(r.stdout)}`);
  });

  it(NAMES[6], async () => {
    const { signal } = checkRun();
    const file = path.join(ctx.sandbox.dirs.tmp, 'snippet.py');
    fs.writeFileSync(file, "total = sum(range(5))\nprint('total', total)\ntotal * 2\n");
    const r = await exec(['--file', ctx.analysis.path, file], signal);
    eq(r.code, 0, `exit code (${summarize(r)})`);
    eq(r.stdout, 'total 10\n20\n', 'stdout (printed line, then the trailing expression)');
  });

  it(NAMES[7], async () => {
    const { signal } = checkRun();
    const r = await exec(['--file', ctx.analysis.path, '-c', 'print(1)'], signal, { env: ctx.baseEnv });
    eq(r.code, 1, `exit code (${summarize(r)})`);
    includes(r.stderr, 'Failed to connect', 'stderr');
  });

  it(NAMES[8], async function () {
    this.timeout(300_000);
    const { signal, note } = checkRun();
    const lines = 150_000;
    const code = `for i in range(${lines}):\n    print(f"{i:08d} " + "x" * 91)`;
    const printed = Array.from({ length: lines }, (_, i) => `${String(i).padStart(8, '0')} ${'x'.repeat(91)}\n`).join('');
    // The same request the script sends, by curl alone: its time is noted beside the script's (the bench compares them).
    const curl = await runCommand(
      'curl',
      [
        '-sN',
        '-X',
        'POST',
        `${ctx.advert.url}/api/kernel/execute`,
        '-H',
        'Content-Type: application/json',
        '-H',
        `Marimo-Session-Id: ${ctx.analysis.session.id}`,
        '-H',
        `Authorization: Bearer ${ctx.advert.token}`,
        '-d',
        JSON.stringify({ code }),
        '-o',
        '/dev/null',
      ],
      signal,
    );
    const r = await runScript(execute, ['--url', ctx.advert.url, '--file', ctx.analysis.path, '-c', code], {
      env: ctx.withToken,
      signal,
      timeoutMs: 240_000,
    });
    note(
      `raw curl ${curl.ms} ms, execute-code.sh ${r.ms} ms (ratio ${(r.ms / curl.ms).toFixed(2)}), stdout ${r.stdout.length} characters`,
    );
    eq(r.code, 0, `exit code (${summarize(r)})`);
    const cut =
      /\[agent-bridge: (\d+) characters cut here, after character (\d+); the whole output \((\d+) characters\) is at (\S+) for/.exec(
        r.stderr,
      );
    ok(cut, `no cut note on stderr: ${show(r.stderr, 400)}`);
    const [cutChars, headChars, whole] = [Number(cut[1]), Number(cut[2]), Number(cut[3])];
    eq(whole, printed.length, 'characters printed, as the note counts them');
    // stdout: the head, the tail, and the script's newline after `done`; nothing else lost.
    const expected = printed.slice(0, headChars) + printed.slice(headChars + cutChars) + '\n';
    ok(
      r.stdout === expected,
      `stdout is not the printed text minus what the note says was cut (${r.stdout.length} vs ${expected.length} characters)`,
    );
    const fetched = await runCommand('curl', ['-sf', '-H', `Authorization: Bearer ${ctx.advert.token}`, cut[4]!], signal);
    eq(fetched.code, 0, `curl ${cut[4]} exit code`);
    ok(
      fetched.stdout === printed,
      `the output at the URL is not the whole printed text (${fetched.stdout.length} of ${printed.length} characters)`,
    );
  });

  it(NAMES[9], async function () {
    this.timeout(60_000);
    const { signal } = checkRun();
    const code = 'import time\ntime.sleep(6)\nprint("awake")';
    const raw = await ctx.client.run(ctx.analysis.session.id, code, { signal, timeoutMs: 40_000 });
    ok(raw.heartbeats.length > 0, `no heartbeat on the stream of a silent run: ${show(raw.raw, 400)}`);
    eq(raw.stdout, 'awake\n', "the stream's stdout");
    const r = await exec(['--file', ctx.analysis.path, '-c', code], signal);
    eq(r.code, 0, `exit code (${summarize(r)})`);
    // The script prints a `done` with no value as an empty line, as it does for marimo's.
    eq(r.stdout, 'awake\n\n', 'stdout of execute-code.sh');
    eq(r.stderr, '', 'stderr of execute-code.sh');
  });
}

/** A command with its stdout, exit code and duration (no shell). */
export function runCommand(
  file: string,
  args: string[],
  signal: AbortSignal,
): Promise<{ code: number | null; stdout: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'ignore'], signal });
    const chunks: Buffer[] = [];
    child.stdout!.on('data', (d: Buffer) => chunks.push(d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(chunks).toString('utf8'), ms: Date.now() - t0 }));
  });
}
