/**
 * The conformance corpus: what an agent does through marimo-pair's real scripts and over raw
 * HTTP, run the same way against every target. A case observes one target; the suite runs it on
 * each and compares (normalise.ts). `intended` names the one difference a case may show
 * (differences.ts); any other is unexpected.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { runCommand, runScript } from '../checks/scripts';
import type { DifferenceId } from './differences';
import { startMarimo } from './marimoServer';
import { type Observation, observeHttp, observeScript, observeStream, type Target } from './target';

export interface CaseEnv {
  discover: string;
  execute: string;
  /** A folder for the case's files. */
  tmp: string;
  /** The sandbox's id, for the marker of any server a case starts. */
  sandboxId: string;
  signal: AbortSignal;
}

export interface Case {
  name: string;
  /** The intended differences this case may show (none: it must be identical). */
  intended?: readonly DifferenceId[];
  /** Runs with no other case at the same time: it measures timing, concurrency or the registry, or loads the machine. */
  alone?: boolean;
  observe(t: Target, env: CaseEnv): Promise<Observation>;
}

const SCRIPT_TIMEOUT_MS = 60_000;

/** execute-code.sh with --url and the token in MARIMO_TOKEN, as the skill tells agents to call it. */
function exec(t: Target, env: CaseEnv, args: string[], opts: { stdin?: string; token?: string | null } = {}) {
  const token = opts.token === undefined ? t.token : opts.token;
  return runScript(env.execute, ['--url', t.url, ...args], {
    env: { ...t.env, ...(token === null ? {} : { MARIMO_TOKEN: token }) },
    stdin: opts.stdin,
    signal: env.signal,
    timeoutMs: SCRIPT_TIMEOUT_MS,
  });
}

/** A script case on the analysis notebook. */
const script = (name: string, code: string, intended?: DifferenceId[]): Case => ({
  name: `execute-code.sh: ${name}`,
  intended,
  observe: async (t, env) => observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', code])),
});

/** A raw execute request on the analysis notebook, observed as a stream; its `done` carries the bridge's status. */
const stream = (name: string, code: string, intended: DifferenceId[] = []): Case => ({
  name: `execute stream: ${name}`,
  intended: ['doneStatus', ...intended],
  observe: async (t, env) =>
    observeStream(await t.client.run(t.analysis.session, code, { signal: env.signal, timeoutMs: SCRIPT_TIMEOUT_MS })),
});

/**
 * Whether the traceback in `stderr` stands on lines of its own: it starts a line (Python's
 * `Traceback (most recent call last):`, or IPython's line of dashes) and its last line ends one.
 */
function tracebackOnOwnLines(stderr: string, last: string): boolean {
  const start = stderr.search(/Traceback \(most recent call last\)|-{20,}/);
  return start >= 0 && (start === 0 || stderr[start - 1] === '\n') && stderr.includes(`${last}\n`);
}

/** Whether marimo-pair's skill finds code mode in a version (marimo shipped it in 0.21.1). */
function hasCodeMode(version: unknown): boolean {
  if (typeof version !== 'string' || !/^\d+\.\d+\.\d+/.test(version)) return false;
  const [major, minor, patch] = version.split('.').map((n) => parseInt(n, 10)) as [number, number, number];
  return major > 0 || minor > 21 || (minor === 21 && patch >= 1);
}

/** A raw request to the execute endpoint with everything under the case's control. */
const rawExecute = (
  name: string,
  alone: boolean,
  make: (t: Target) => { body?: string | Buffer; contentType?: string; headers?: Record<string, string>; token?: string | null },
  intended?: DifferenceId[],
): Case => ({
  name: `execute: ${name}`,
  intended,
  alone,
  observe: async (t, env) => {
    const r = make(t);
    return observeHttp(
      await t.client.request({
        method: 'POST',
        path: '/api/kernel/execute',
        body: r.body,
        contentType: r.contentType,
        headers: r.headers,
        token: r.token,
        timeoutMs: 60_000,
        signal: env.signal,
      }),
    );
  },
});

const session = (t: Target) => ({ 'marimo-session-id': t.analysis.session });
const json = (v: unknown) => JSON.stringify(v);

/** Runs two observations in order and reports both. */
async function both(first: Promise<Observation>, second: () => Promise<Observation>): Promise<Observation> {
  const a = await first;
  const b = await second();
  return {
    exit: b.exit,
    stdout: `${a.stdout}--\n${b.stdout}`,
    stderr: `${a.stderr}--\n${b.stderr}`,
    extra: { firstExit: a.exit },
  };
}

export const CORPUS: readonly Case[] = [
  // ---- execute-code.sh: choosing the notebook
  {
    name: 'execute-code.sh: without --file on a server with two notebooks',
    observe: async (t, env) => observeScript(await exec(t, env, ['-c', 'print(1)'])),
  },
  {
    name: 'execute-code.sh: --url with a trailing slash',
    observe: async (t, env) =>
      observeScript(
        await runScript(env.execute, ['--url', `${t.url}/`, '--file', t.analysis.path, '-c', 'print(2)'], {
          env: { ...t.env, MARIMO_TOKEN: t.token },
          signal: env.signal,
          timeoutMs: SCRIPT_TIMEOUT_MS,
        }),
      ),
  },
  script('--file selects the analysis notebook', 'print(1)'),
  {
    name: 'execute-code.sh: --file selects the other notebook',
    observe: async (t, env) => observeScript(await exec(t, env, ['--file', t.other.path, '-c', 'print(label)'])),
  },
  {
    name: 'execute-code.sh: --session',
    observe: async (t, env) => observeScript(await exec(t, env, ['--session', t.analysis.session, '-c', 'print(x)'])),
  },
  {
    name: 'execute-code.sh: --session that does not exist',
    intended: ['unknownSessionNamesNotebooks'],
    observe: async (t, env) => observeScript(await exec(t, env, ['--session', 'no-such-session', '-c', 'print(1)'])),
  },
  {
    name: 'execute-code.sh: --file that matches no session',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--file', path.join(path.dirname(t.analysis.path), 'nope.py'), '-c', '1'])),
  },
  {
    name: 'execute-code.sh: --file and --session together',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--file', t.analysis.path, '--session', t.analysis.session, '-c', '1'])),
  },
  // ---- execute-code.sh: where the code comes from
  {
    name: 'execute-code.sh: code from stdin (-)',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--file', t.analysis.path, '-'], { stdin: 'print(3 * 3)\nprint("ü")\n' })),
  },
  {
    name: 'execute-code.sh: code piped in without -',
    observe: async (t, env) => observeScript(await exec(t, env, ['--file', t.analysis.path], { stdin: 'print("piped")\n' })),
  },
  {
    name: 'execute-code.sh: code from a file argument',
    observe: async (t, env) => {
      const file = path.join(env.tmp, `snippet-${t.name}.py`);
      fs.writeFileSync(file, "total = sum(range(5))\nprint('total', total)\n");
      return observeScript(await exec(t, env, ['--file', t.analysis.path, file]));
    },
  },
  // ---- execute-code.sh: what the code does
  script('unicode in and out', 'print("ü€ 中文 😀", "\\u00e9")'),
  script('print without a newline', 'print("a", end="")'),
  script('stderr', 'import sys\nprint("to stderr", file=sys.stderr)\nprint("to stdout")'),
  script('a global defined by a cell', 'print(x + 1)'),
  script('a syntax error', 'def f(:\n    pass', ['tracebacks']),
  script('an exception', 'def g():\n    raise ValueError("boom")\ng()', ['tracebacks']),
  script('output, then an exception', 'print("before")\n1 / 0', ['tracebacks']),
  {
    name: 'execute-code.sh: output without a line break, then an exception: the traceback on lines of its own',
    observe: async (t, env) => {
      const code = 'import sys\nsys.stderr.write("partial")\nprint("out", end="")\nraise ValueError("x")';
      const r = await exec(t, env, ['--file', t.analysis.path, '-c', code]);
      return { exit: r.code, stdout: r.stdout, extra: { ownLines: tracebackOnOwnLines(r.stderr, 'ValueError: x') } };
    },
  },
  {
    name: 'execute-code.sh: a run silent for 6 s (the stream says it is alive meanwhile)',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', 'import time\ntime.sleep(6)\nprint("awake")'])),
  },
  script('a trailing value', '6 * 7', ['plainTrailingValue']),
  script('a trailing None', 'None'),
  script('a trailing string', "'abc'", ['plainTrailingValue']),
  script('only a comment', '# nothing'),
  script('empty code', ''),
  script('sys.exit', 'import sys\nsys.exit(3)', ['tracebacks']),
  script('time.sleep with output between', 'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)'),
  {
    name: 'execute-code.sh: new bindings are discarded',
    intended: ['tracebacks'],
    observe: (t, env) =>
      both(exec(t, env, ['--file', t.analysis.path, '-c', 'zz_conformance = 1']).then(observeScript), async () =>
        observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', 'print(zz_conformance)'])),
      ),
  },
  {
    name: 'execute-code.sh: an in-place mutation is kept',
    observe: (t, env) =>
      both(
        exec(t, env, [
          '--file',
          t.analysis.path,
          '-c',
          'import sys\nsys.conformance_mark = [1]\nsys.conformance_mark.append(2)',
        ]).then(observeScript),
        async () =>
          observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', 'import sys\nprint(sys.conformance_mark)'])),
      ),
  },
  {
    name: 'execute-code.sh: two concurrent runs',
    alone: true,
    observe: async (t, env) => {
      const code = (n: number) => `import time\nfor i in range(3):\n    print(${n}, i, flush=True)\n    time.sleep(0.1)`;
      const [a, b] = await Promise.all([1, 2].map((n) => exec(t, env, ['--file', t.analysis.path, '-c', code(n)])));
      return {
        exit: a!.code,
        stdout: [a!.stdout, b!.stdout].sort().join('--\n'),
        stderr: a!.stderr + b!.stderr,
        extra: { second: b!.code },
      };
    },
  },
  {
    name: 'execute-code.sh: 1 MB of output',
    alone: true,
    intended: ['outputCap'],
    observe: async (t, env) =>
      observeScript(
        await exec(t, env, ['--file', t.analysis.path, '-c', 'for i in range(10_000):\n    print(f"{i:08d} " + "x" * 91)']),
      ),
  },
  // ---- execute-code.sh: the token
  {
    name: 'execute-code.sh: the token as --token',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--token', t.token, '--file', t.analysis.path, '-c', 'print(5)'], { token: null })),
  },
  {
    name: 'execute-code.sh: without a token',
    observe: async (t, env) => observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', 'print(5)'], { token: null })),
  },
  {
    name: 'execute-code.sh: a wrong token',
    observe: async (t, env) =>
      observeScript(await exec(t, env, ['--file', t.analysis.path, '-c', 'print(5)'], { token: 'wrong' })),
  },
  // ---- discover-servers.sh
  {
    name: 'discover-servers.sh: one server',
    alone: true,
    intended: ['tokenRequired'],
    observe: async (t, env) =>
      observeScript(await runScript(env.discover, [], { env: t.env, signal: env.signal, timeoutMs: SCRIPT_TIMEOUT_MS })),
  },
  {
    name: 'discover-servers.sh: two servers (a --no-token marimo beside it)',
    alone: true,
    intended: ['tokenRequired'],
    observe: async (t, env) => {
      const second = await startMarimo({ token: null, sandboxId: env.sandboxId, stateHome: t.stateHome });
      try {
        return observeScript(await runScript(env.discover, [], { env: t.env, signal: env.signal, timeoutMs: SCRIPT_TIMEOUT_MS }));
      } finally {
        await second.stop();
      }
    },
  },
  // ---- raw HTTP
  {
    name: 'GET /health',
    intended: ['healthNamesServer'],
    observe: async (t, env) => observeHttp(await t.client.get('/health', { token: null, signal: env.signal })),
  },
  {
    name: 'GET /api/sessions',
    observe: async (t, env) => observeHttp(await t.client.get('/api/sessions', { signal: env.signal })),
  },
  {
    name: 'GET /api/sessions with the token in the query',
    intended: ['headerToken'],
    observe: async (t, env) =>
      observeHttp(await t.client.get(`/api/sessions?access_token=${t.token}`, { token: null, signal: env.signal })),
  },
  {
    name: 'GET /api/sessions without a token',
    observe: async (t, env) => observeHttp(await t.client.get('/api/sessions', { token: null, signal: env.signal })),
  },
  {
    name: 'GET /api/sessions with a wrong token',
    observe: async (t, env) => observeHttp(await t.client.get('/api/sessions', { token: 'wrong', signal: env.signal })),
  },
  {
    // marimo-pair's skill tells agents to have the person upgrade a marimo older than 0.21.1: the
    // version the bridge gives (/health, and its registry entry) is marimo's, not its own.
    name: 'the version marimo-pair reads is a marimo version with code mode: /health and the registry agree',
    observe: async (t, env) => {
      if (t.name === 'marimo') {
        const own = (await t.client.get('/api/version', { signal: env.signal })).text.trim();
        return { extra: { version: own, codeMode: hasCodeMode(own) } };
      }
      const health = (await t.client.get('/health', { token: null, signal: env.signal })).json<{ version?: string }>().version;
      const listed = await runScript(env.discover, [], { env: t.env, signal: env.signal, timeoutMs: SCRIPT_TIMEOUT_MS });
      const entry = (JSON.parse(listed.stdout) as { url: string | null; version?: string }[]).find((e) => e.url === t.url);
      const version = health === entry?.version ? health : `/health ${health}, registry ${entry?.version}`;
      return { extra: { version, codeMode: hasCodeMode(version) } };
    },
  },
  stream('print, then done', 'print("hi")'),
  stream('a run with no value: done as marimo sends it', 'zz_no_value = 1'),
  {
    name: 'execute stream: a run silent for 6 s says it is alive every 5 s',
    intended: ['doneStatus', 'heartbeat'],
    observe: async (t, env) => {
      const r = await t.client.run(t.analysis.session, 'import time\ntime.sleep(6)\nprint("awake")', {
        signal: env.signal,
        timeoutMs: SCRIPT_TIMEOUT_MS,
      });
      return { ...observeStream(r), extra: { alive: r.heartbeats.length > 0 } };
    },
  },
  stream('a trailing value', '6 * 7', ['plainTrailingValue']),
  stream('an exception', 'raise KeyError("k")', ['tracebacks']),
  stream('stdout and stderr interleaved', 'import sys\nprint("o1")\nprint("e1", file=sys.stderr)\nprint("o2")'),
  {
    name: 'execute stream: time.sleep streams each line as it is printed',
    alone: true,
    intended: ['doneStatus'],
    observe: async (t, env) => {
      const r = await t.client.run(
        t.analysis.session,
        'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.4)',
        {
          signal: env.signal,
          timeoutMs: SCRIPT_TIMEOUT_MS,
        },
      );
      const arrivals = r.events.filter((e) => e.event === 'stdout').map((e) => e.at);
      const spread = arrivals.length ? arrivals[arrivals.length - 1]! - arrivals[0]! : 0;
      return { ...observeStream(r), extra: { streamed: spread >= 500 } };
    },
  },
  {
    name: 'execute stream: a client disconnect mid-run interrupts the run',
    alone: true,
    intended: ['doneStatus', 'interruptNotCarriedOver'],
    observe: async (t, env) => {
      const s = t.client.execute(
        t.analysis.session,
        'import time\nfor i in range(100):\n    print(i, flush=True)\n    time.sleep(0.1)',
        {
          signal: env.signal,
          timeoutMs: SCRIPT_TIMEOUT_MS,
        },
      );
      await s.next((e) => e.event === 'stdout', 20_000);
      s.disconnect();
      const t0 = Date.now();
      const after = await t.client.run(t.analysis.session, 'print("after")', {
        signal: env.signal,
        timeoutMs: SCRIPT_TIMEOUT_MS,
      });
      return { ...observeStream(after), extra: { nextRunWithin5s: Date.now() - t0 < 5000 } };
    },
  },
  { ...stream('15 MB of output', 'for i in range(150_000):\n    print(f"{i:08d} " + "x" * 91)', ['outputCap']), alone: true },
  rawExecute('without Marimo-Session-Id', false, () => ({ body: json({ code: '1' }), contentType: 'application/json' }), [
    'errorStatuses',
  ]),
  rawExecute(
    'with an unknown session',
    false,
    () => ({ body: json({ code: '1' }), contentType: 'application/json', headers: { 'marimo-session-id': 'no-such-session' } }),
    ['errorStatuses'],
  ),
  rawExecute('without a token', false, (t) => ({
    body: json({ code: '1' }),
    contentType: 'application/json',
    headers: session(t),
    token: null,
  })),
  rawExecute('with a wrong token', false, (t) => ({
    body: json({ code: '1' }),
    contentType: 'application/json',
    headers: session(t),
    token: 'x',
  })),
  rawExecute(
    'Content-Type text/plain',
    false,
    (t) => ({ body: json({ code: '1' }), contentType: 'text/plain', headers: session(t) }),
    ['jsonOnly'],
  ),
  rawExecute('an empty body', false, (t) => ({ body: '', contentType: 'application/json', headers: session(t) }), [
    'errorStatuses',
  ]),
  rawExecute('invalid JSON', false, (t) => ({ body: '{nope', contentType: 'application/json', headers: session(t) }), [
    'errorStatuses',
  ]),
  rawExecute('no "code"', false, (t) => ({ body: '{}', contentType: 'application/json', headers: session(t) })),
  rawExecute('"code" not a string', false, (t) => ({
    body: json({ code: 5 }),
    contentType: 'application/json',
    headers: session(t),
  })),
  {
    // By curl, as an agent sends it: a server that answers before reading the whole body may
    // close the connection under a client still writing, and curl reads the answer all the same.
    name: 'execute: a 30 MB body',
    intended: ['bodyLimit'],
    alone: true,
    observe: async (t, env) => {
      const file = path.join(env.tmp, 'body-30mb.json');
      if (!fs.existsSync(file)) fs.writeFileSync(file, json({ code: `zz_ = 1 # ${'#'.repeat(30 * 1024 * 1024)}` }));
      const out = path.join(env.tmp, `answer-${t.name}`);
      const r = await runCommand(
        'curl',
        [
          '-s',
          '-o',
          out,
          '-w',
          '%{http_code} %{content_type}',
          '-X',
          'POST',
          `${t.url}/api/kernel/execute`,
          '-H',
          'Content-Type: application/json',
          '-H',
          `Marimo-Session-Id: ${t.analysis.session}`,
          '-H',
          `Authorization: Bearer ${t.token}`,
          '--data-binary',
          `@${file}`,
        ],
        env.signal,
      );
      const [status, type] = r.stdout.split(' ');
      let body: unknown;
      try {
        body = JSON.parse(fs.readFileSync(out, 'utf8'));
      } catch {
        body = '(not JSON)';
      }
      return { status: Number(status), contentType: (type ?? '').split(';')[0], json: body };
    },
  },
  {
    name: 'GET /api/kernel/execute',
    observe: async (t, env) =>
      observeHttp(await t.client.get('/api/kernel/execute', { headers: session(t), signal: env.signal })),
  },
];
