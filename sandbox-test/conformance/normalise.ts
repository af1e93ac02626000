/**
 * The normalisers: everything the conformance suite lets differ between two targets before it
 * compares them, in this one place. Each replaces what must differ (a port, a token, an id, a
 * path, a time) by a placeholder; nothing else is touched. JSON bodies are then compared by shape
 * (keys and value types), event streams by event names and the text of each stream.
 */
import * as path from 'node:path';
import type { Observation, Target } from './target';

interface Normaliser {
  name: string;
  /** Why the value must differ between servers. */
  why: string;
  apply(text: string, t: Target): string;
}

const replaceAll = (text: string, what: string, by: string) => (what ? text.split(what).join(by) : text);

export const NORMALISERS: readonly Normaliser[] = [
  {
    name: 'tokens',
    why: 'each server has its own token',
    apply: (s, t) => replaceAll(s, t.token, '<token>'),
  },
  {
    name: 'session ids',
    why: 'marimo takes the id its front end chose; the bridge makes its own',
    apply: (s, t) => replaceAll(replaceAll(s, t.analysis.session, '<session:analysis>'), t.other.session, '<session:other>'),
  },
  {
    name: 'notebook paths',
    why: 'each target has its own copy of the fixtures (.py for marimo, .ipynb for the bridge)',
    apply: (s, t) => replaceAll(replaceAll(s, t.analysis.path, '<notebook:analysis>'), t.other.path, '<notebook:other>'),
  },
  {
    name: 'notebook folders',
    why: "each target's fixtures are in a temp folder of their own",
    apply: (s, t) => replaceAll(s, `${path.dirname(t.analysis.path)}/`, '<notebooks>/'),
  },
  {
    name: 'ports',
    why: 'each server listens on a free port',
    apply: (s) => s.replace(/\b127\.0\.0\.1:\d+\b/g, '127.0.0.1:<port>'),
  },
  {
    name: 'scratchpad file names',
    why: "a traceback names the file the scratchpad's code was compiled as; marimo's is a temp file",
    apply: (s) => s.replace(/File "[^"\n]*(?:__marimo__cell___scratch___\.py|<scratchpad>)"/g, 'File "<scratchpad>"'),
  },
  {
    name: 'timings',
    why: 'start times and durations',
    apply: (s) => s.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?/g, '<time>'),
  },
];

export function normaliseText(text: string, t: Target): string {
  return NORMALISERS.reduce((s, n) => n.apply(s, t), text);
}

/** Keys and value types, recursively (keys normalised too: /api/sessions is keyed by session id). */
export function shapeOf(value: unknown, t: Target): unknown {
  if (Array.isArray(value)) {
    const shapes = [...new Set(value.map((v) => JSON.stringify(shapeOf(v, t))))].sort();
    return shapes.map((s) => JSON.parse(s) as unknown);
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).map(([k, v]) => [normaliseText(k, t), shapeOf(v, t)] as const);
    return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
  }
  return value === null ? 'null' : typeof value;
}

/** Every string in a value normalised (for `done`, whose values are compared, not only its shape). */
function normaliseValue(value: unknown, t: Target): unknown {
  if (typeof value === 'string') return normaliseText(value, t);
  if (Array.isArray(value)) return value.map((v) => normaliseValue(v, t));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [normaliseText(k, t), normaliseValue(v, t)]));
  return value;
}

/** An observation as it is compared: texts normalised, JSON reduced to its shape. */
export function normalise(o: Observation, t: Target): Observation {
  const out: Observation = { ...o };
  if (o.stdout !== undefined) out.stdout = normaliseText(o.stdout, t);
  if (o.stderr !== undefined) out.stderr = normaliseText(o.stderr, t);
  if (o.json !== undefined) out.json = shapeOf(o.json, t);
  if (o.done !== undefined) out.done = normaliseValue(o.done, t);
  if (o.extra !== undefined) out.extra = normaliseValue(o.extra, t) as Record<string, unknown>;
  return out;
}

/** The fields in which two normalised observations differ. */
export function differingFields(a: Observation, b: Observation): (keyof Observation)[] {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])] as (keyof Observation)[];
  return keys.filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}
