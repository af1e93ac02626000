/**
 * The differential conformance suite: the corpus (conformance/corpus.ts) run against a real
 * `marimo edit --headless` server and against the bridge (builtin kernel; and the bridge over the
 * real marimo extension when that extension is given), compared after the named normalisers
 * (conformance/normalise.ts). Each case is a check: identical, or showing exactly the intended
 * difference it names (conformance/differences.ts, listed in SETUP.md under "Differences from
 * marimo"); anything else fails it. The last check prints
 * `conformance: N cases, I identical, D intended, U unexpected`.
 *
 * Without marimo in the stack's venv, or without marimo-pair's scripts, every case is reported
 * skipped by name with the reason.
 */
import { setMaxListeners } from 'node:events';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { show } from '../assert';
import { type Case, CORPUS, type CaseEnv } from '../conformance/corpus';
import { DIFFERENCES, explained } from '../conformance/differences';
import { MARIMO_FIXTURES, marimoMissing, type MarimoServer, startMarimo } from '../conformance/marimoServer';
import { differingFields, normalise } from '../conformance/normalise';
import type { Observation, Target } from '../conformance/target';
import { findExtension, type GivenExtension } from '../extensions';
import { MARIMO_ID } from '../marimoExtension';
import { REPO_ROOT } from '../vscode';
import { type CheckContext, checkRun, skipped, callerEnv, suiteState } from './context';
import { scriptsDir } from './scripts';
import { randomHex } from '../../src/core/ids';

/** Cases observed at the same time (each runs on every target at once). */
const POOL = 4;
const SUMMARY = 'conformance: the summary line, and every intended difference is in SETUP.md';
type Verdict = 'identical' | 'intended' | 'unexpected';

async function marimoTarget(server: MarimoServer): Promise<Target> {
  const notebook = (name: keyof typeof MARIMO_FIXTURES) => ({
    session: `s_${name}`,
    path: path.join(server.dir, MARIMO_FIXTURES[name]),
  });
  const target: Target = {
    name: 'marimo',
    url: server.url,
    token: server.token!,
    client: server.client,
    analysis: notebook('analysis'),
    other: notebook('other'),
    env: callerEnv(server), // its registry, no token
    stateHome: server.stateHome,
  };
  await server.openSession(target.analysis.session, MARIMO_FIXTURES.analysis);
  await server.openSession(target.other.session, MARIMO_FIXTURES.other);
  return target;
}

/** The bridge over the builtin kernel, on the harness's fixtures, with their defining cells run as marimo runs its cells on open. */
async function bridgeTarget(ctx: CheckContext): Promise<Target> {
  for (const [nb, cell] of [
    [ctx.analysis, 'a1'],
    [ctx.other, 'o1'],
  ] as const) {
    const r = await ctx.client.post(
      `/notebooks/cells/${cell}/run`,
      { notebook: nb.session.id, wait: true },
      { timeoutMs: 60_000 },
    );
    if (r.status !== 200) throw new Error(`running ${nb.name} ${cell}: ${r.status} ${r.text.slice(0, 300)}`);
  }
  return {
    name: 'bridge',
    url: ctx.advert.url,
    token: ctx.advert.token ?? '',
    client: ctx.client,
    analysis: { session: ctx.analysis.session.id, path: ctx.analysis.path },
    other: { session: ctx.other.session.id, path: ctx.other.path },
    env: callerEnv(ctx.sandbox.dirs),
    stateHome: ctx.sandbox.dirs.stateHome,
  };
}

/** The bridge over the real marimo extension: the marimo twins of the fixtures, opened through the bridge. */
async function marimoExtensionTarget(ctx: CheckContext, bridge: Target): Promise<Target> {
  const open = async (name: keyof typeof MARIMO_FIXTURES) => {
    const file = path.join(ctx.workspace, MARIMO_FIXTURES[name]);
    const r = await ctx.client.post('/notebooks/open', { path: file, kernel: 'marimo' }, { timeoutMs: 150_000 });
    if (r.status !== 200) throw new Error(`opening ${file} with the marimo extension: ${r.status} ${r.text.slice(0, 300)}`);
    return { session: r.json<{ session: { id: string } }>().session.id, path: file };
  };
  return { ...bridge, name: 'bridge (marimo extension)', analysis: await open('analysis'), other: await open('other') };
}

type Settled = { observations: Observation[] } | { error: unknown };

/**
 * Starts every case on every target: up to POOL cases at a time, then the cases that must run
 * alone one by one. Runs of one notebook queue on both servers, so cases that share a notebook
 * only wait for each other. Each case's checks await its entry.
 */
function observeAll(targets: readonly Target[], env: CaseEnv): Map<Case, Promise<Settled>> {
  const observe = (c: Case): Promise<Settled> =>
    Promise.all(targets.map((t) => c.observe(t, env))).then(
      (observations) => ({ observations }),
      (error: unknown) => ({ error }),
    );
  const pooled = CORPUS.filter((c) => !c.alone);
  const results = new Map<Case, Promise<Settled>>();
  const starts = new Map<Case, () => void>();
  for (const c of CORPUS)
    results.set(
      c,
      new Promise<void>((resolve) => starts.set(c, resolve)).then(() => observe(c)),
    );
  let next = 0;
  const worker = async () => {
    while (next < pooled.length) {
      const c = pooled[next++]!;
      starts.get(c)!();
      await results.get(c);
    }
  };
  void Promise.all(Array.from({ length: POOL }, worker)).then(async () => {
    for (const c of CORPUS.filter((x) => x.alone)) {
      starts.get(c)!();
      await results.get(c);
    }
  });
  return results;
}

function describeDiff(fields: readonly (keyof Observation)[], a: Observation, b: Observation, names: [string, string]): string {
  return fields.map((f) => `${f}: ${names[0]} ${show(a[f], 600)} / ${names[1]} ${show(b[f], 600)}`).join('\n');
}

/** The `conformance` suite (skipped by name, with the reason, without marimo or the scripts). */
export function conformanceChecks(extensions: readonly GivenExtension[]): void {
  const scripts = scriptsDir();
  const missing =
    marimoMissing() ??
    (!scripts
      ? 'MARIMO_PAIR_SCRIPTS is not set'
      : !fs.existsSync(path.join(scripts, 'execute-code.sh'))
        ? `no execute-code.sh in ${scripts}`
        : undefined);
  const names = CORPUS.map((c) => `conformance: ${c.name}`);
  if (missing) return skipped([...names, SUMMARY], missing);
  const withExtension = 'extension' in findExtension(extensions, MARIMO_ID);

  const ctx = suiteState();
  let server: MarimoServer | undefined;
  let targets: Target[] = [];
  let tmp: string;
  const verdicts = new Map<string, Verdict>();
  const stopAll = new AbortController();
  setMaxListeners(0, stopAll.signal); // every script and request of the corpus listens to it
  let observed: Map<Case, Promise<Settled>> = new Map();

  before('start marimo edit --headless and open its sessions', async function () {
    this.timeout(180_000);
    tmp = fs.mkdtempSync(path.join(ctx.sandbox.dirs.tmp, 'conformance-'));
    server = await startMarimo({ token: randomHex(16), sandboxId: ctx.sandbox.id });
    const [marimo, bridge] = await Promise.all([marimoTarget(server), bridgeTarget(ctx)]);
    targets = [marimo, bridge];
    if (withExtension) targets.push(await marimoExtensionTarget(ctx, bridge));
    const env: CaseEnv = {
      discover: path.join(scripts!, 'discover-servers.sh'),
      execute: path.join(scripts!, 'execute-code.sh'),
      tmp,
      signal: stopAll.signal,
      sandboxId: ctx.sandbox.id,
    };
    observed = observeAll(targets, env);
  });

  after('stop the marimo server', async function () {
    this.timeout(30_000);
    stopAll.abort();
    await Promise.all(observed.values());
    await server?.stop();
  });

  CORPUS.forEach((c, i) => {
    it(names[i]!, async function () {
      this.timeout(600_000);
      const { note } = checkRun();
      const result = await observed.get(c)!;
      if ('error' in result) throw result.error;
      const seen = result.observations.map((o, k) => normalise(o, targets[k]!));
      const [reference, ...others] = seen;
      let verdict: Verdict = 'identical';
      const problems: string[] = [];
      others.forEach((o, k) => {
        const fields = differingFields(reference!, o);
        if (!fields.length) return;
        const diff = describeDiff(fields, reference!, o, ['marimo', targets[k + 1]!.name]);
        note(diff);
        if (explained(c.intended ?? [], reference!, o, fields)) {
          if (verdict === 'identical') verdict = 'intended';
          return;
        }
        verdict = 'unexpected';
        const titles = (c.intended ?? []).map((id) => `"${DIFFERENCES[id].title}"`).join(', ');
        problems.push(`${targets[k + 1]!.name} differs from marimo${titles ? ` beyond ${titles}` : ''}:\n${diff}`);
      });
      verdicts.set(c.name, verdict);
      if (problems.length) throw new Error(problems.join('\n'));
    });
  });

  it(SUMMARY, function () {
    const count = (v: Verdict) => [...verdicts.values()].filter((x) => x === v).length;
    const line = `conformance: ${verdicts.size} cases, ${count('identical')} identical, ${count('intended')} intended, ${count('unexpected')} unexpected`;
    process.stdout.write(`      ${line}\n`);
    const setup = fs.readFileSync(path.join(REPO_ROOT, 'SETUP.md'), 'utf8');
    const section = setup.slice(setup.indexOf('## Differences from marimo'));
    const unlisted = Object.values(DIFFERENCES)
      .map((d) => d.title)
      .filter((title) => !setup.includes('## Differences from marimo') || !section.includes(title));
    if (unlisted.length) throw new Error(`not in SETUP.md under "Differences from marimo": ${unlisted.join('; ')}`);
    if (verdicts.size < CORPUS.length) throw new Error(`${line}: ${CORPUS.length - verdicts.size} cases did not finish`);
    if (count('unexpected')) throw new Error(line);
  });
}
