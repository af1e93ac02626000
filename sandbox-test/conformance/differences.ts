/**
 * The intended differences from marimo: each has an entry in SETUP.md under "Differences from
 * marimo" (its title, word for word, with the reason), and a test of its signature: which fields
 * of a pair of observations it accounts for. A case names the differences it may show; a field
 * that differs and that none of them accounts for is unexpected.
 */
import type { Observation } from './target';

export type Field = keyof Observation;

export interface Difference {
  /** As it appears in SETUP.md's "Differences from marimo". */
  title: string;
  /** The fields this difference accounts for in a pair of normalised observations (none when its signature is absent). */
  accounts(marimo: Observation, bridge: Observation): Field[];
}

const when = (holds: boolean, fields: Field[]): Field[] => (holds ? fields : []);
const lastLine = (s: string | undefined) => (s ?? '').trimEnd().split('\n').pop() ?? '';
const parse = (s: string | undefined): unknown => {
  try {
    return JSON.parse(s ?? '');
  } catch {
    return undefined;
  }
};

/** The note the bridge puts on stderr where it cut a run's printed output (src/server/execute.ts). */
const CUT = /\n?\[agent-bridge: (\d+) characters cut here, after character (\d+);[^\]]*\]\n/;

/**
 * True when `capped` is `whole` with the stretch cut out that the note in `stderr` names (its
 * length and where it starts), and `stderr` is otherwise the same as `wholeStderr`: what the cap
 * kept is exactly marimo's output, minus what the note said.
 */
export function isCutOf(capped: string, whole: string, stderr: string, wholeStderr: string): boolean {
  const m = CUT.exec(stderr);
  if (!m) return false;
  const [cut, head] = [Number(m[1]), Number(m[2])];
  return capped === whole.slice(0, head) + whole.slice(head + cut) && stderr.replace(m[0], '') === wholeStderr;
}

export const DIFFERENCES = {
  tokenRequired: {
    title: 'The token is required and the server is listed anyway',
    // marimo lists only --no-token servers; the bridge always has a token and lists itself.
    accounts: (m, b) => {
      const [ml, bl] = [parse(m.stdout), parse(b.stdout)];
      return when(Array.isArray(ml) && Array.isArray(bl) && bl.length === ml.length + 1, ['stdout']);
    },
  },
  plainTrailingValue: {
    title: "A trailing value comes back as text/plain, not in marimo's HTML",
    accounts: (m, b) =>
      when(
        /<pre class='text-xs'>/.test(JSON.stringify([m.done, m.stdout])) && !/<pre /.test(JSON.stringify([b.done, b.stdout])),
        ['stdout', 'done'],
      ),
  },
  tracebacks: {
    title: "Tracebacks are the kernel's own (IPython's, in an IPython kernel)",
    accounts: (m, b) =>
      when(lastLine(m.stderr) === lastLine(b.stderr) && /Error|Exit|Interrupt/.test(lastLine(b.stderr)), ['stderr']),
  },
  doneStatus: {
    title: '`done` also says how the run ended (`status`)',
    accounts: (m, b) => {
      const { status, ...rest } = (b.done ?? {}) as Record<string, unknown>;
      return when(typeof status === 'string' && JSON.stringify(rest) === JSON.stringify(m.done), ['done']);
    },
  },
  interruptNotCarriedOver: {
    title: "An interrupted run's traceback does not spill into the next run",
    accounts: (m, b) =>
      when(
        /KeyboardInterrupt/.test(m.stderr ?? '') &&
          b.stderr === '' &&
          JSON.stringify(m.events?.filter((e) => e !== 'stderr')) === JSON.stringify(b.events),
        ['stderr', 'events'],
      ),
  },
  errorStatuses: {
    title: 'Refused requests get 4xx statuses where marimo answers 500',
    accounts: (m, b) => when(m.status === 500 && (b.status ?? 0) >= 400 && (b.status ?? 0) < 500, ['status']),
  },
  headerToken: {
    title: 'The token is taken from the Authorization header only',
    accounts: (m, b) => when(m.status === 200 && b.status === 401, ['status', 'json']),
  },
  jsonOnly: {
    title: 'A body must be declared as JSON',
    accounts: (m, b) => when(m.status === 200 && b.status === 415, ['status', 'contentType', 'json']),
  },
  bodyLimit: {
    title: 'Request bodies are limited in size',
    accounts: (m, b) => when(m.status === 200 && b.status === 413, ['status', 'contentType', 'json']),
  },
  outputCap: {
    title: "A scratchpad run's printed output is capped, head and tail",
    accounts: (m, b) =>
      when(isCutOf(b.stdout ?? '', m.stdout ?? '', b.stderr ?? '', m.stderr ?? ''), ['stdout', 'stderr', 'events']),
  },
  unknownSessionNamesNotebooks: {
    title: 'An unknown session id is answered with the open notebooks',
    accounts: (m, b) =>
      when(
        /Invalid session id: /.test(m.stderr ?? '') &&
          (b.stderr ?? '').replace(/(Invalid session id: [^;\n]*); the open notebooks are [^\n]*/, '$1') === m.stderr,
        ['stderr'],
      ),
  },
  heartbeat: {
    title: "A silent run's event stream says it is alive every 5 s",
    accounts: (m, b) => when(m.extra?.['alive'] === false && b.extra?.['alive'] === true, ['extra']),
  },
  healthNamesServer: {
    title: "/health also names the server and the bridge's own version",
    accounts: (m, b) => {
      const [mj, bj] = [m.json as Record<string, unknown>, b.json as Record<string, unknown>];
      return when(Object.keys(mj ?? {}).every((k) => bj?.[k] === mj[k]) && bj?.['server'] === 'string', ['json']);
    },
  },
} satisfies Record<string, Difference>;

export type DifferenceId = keyof typeof DIFFERENCES;

/** True when the named differences together account for every field that differs. */
export function explained(ids: readonly DifferenceId[], m: Observation, b: Observation, fields: readonly Field[]): boolean {
  const covered = new Set(ids.flatMap((id) => DIFFERENCES[id].accounts(m, b)));
  return fields.every((f) => covered.has(f));
}
