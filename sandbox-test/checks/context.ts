/**
 * What every check module gets: the running sandbox, the bridge it found and the opened fixtures
 * (`context()`, set by the root hooks once VS Code is up), and per check an AbortSignal and notes
 * (`checkRun()`, started and ended by the root hooks around every mocha test).
 */
import type { MarimoUnderTest } from '../marimoExtension';
import type { Page } from 'playwright-core';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BridgeClient, type SseResult } from '../http';
import type { Sandbox } from '../vscode';
import type { SessionInfo } from '../../src/core/model/notebookHost';
import type { BridgeAdvert } from '../../src/discovery';
import { eq, fail, ok, show } from '../assert';
import { MARKER_VAR } from '../stack';

// The wire shapes, from the extension's own declarations (the checks assert their values).
export type { SessionInfo } from '../../src/core/model/notebookHost';
export type { BridgeAdvert } from '../../src/discovery';

export interface OpenedNotebook {
  /** Fixture name without extension: `analysis`, `other`. */
  name: string;
  /** Absolute path in the temp workspace. */
  path: string;
  session: SessionInfo;
}

export interface CheckContext {
  sandbox: Sandbox;
  workspace: string;
  discoveryFile: string;
  /** The discovery file as read at startup. */
  advert: BridgeAdvert;
  registryDir: string;
  registryFile: string;
  /** Client with the bridge's token. */
  client: BridgeClient;
  analysis: OpenedNotebook;
  other: OpenedNotebook;
  /** The marimo extension installed: the real one when given, else the fake. */
  marimo: MarimoUnderTest;
}

let live: CheckContext | undefined;

/** The running sandbox's context; only inside hooks and tests (suites are declared before it exists). */
export function context(): CheckContext {
  return live ?? fail('the sandbox is not up (the root before-hook did not finish)');
}

export function setContext(ctx: CheckContext | undefined): void {
  live = ctx;
}

/** A suite's live state: the running context, its page, and what the suite's `pick` derived. */
export type SuiteState<T extends object = object> = CheckContext & { readonly page: Page } & T;

/**
 * The preamble every suite shares: registers the suite's before-hook, which runs `pick` once the
 * sandbox is up, and returns the suite's state. Its context fields read the live context (a check
 * that moves the bridge sets a new one), and `page` is the sandbox's page. Reading it before the
 * hook ran (while suites are declared) fails with a message that says so.
 */
export function suiteState<T extends object = object>(pick?: (ctx: CheckContext) => T): SuiteState<T> {
  let picked: T | undefined;
  before(() => {
    picked = pick ? pick(context()) : ({} as T);
  });
  const current = (key: PropertyKey): Record<PropertyKey, unknown> => {
    if (!picked) return fail(`suite state (${String(key)}) read before the sandbox is up: read it inside a hook or a check`);
    const ctx = context();
    return { ...ctx, page: ctx.sandbox.page, ...picked };
  };
  return new Proxy({} as SuiteState<T>, {
    get: (_, key) => current(key)[key],
    has: (_, key) => key in current(key),
    ownKeys: () => Reflect.ownKeys(current('keys')),
    set: (_, key) => fail(`suite state (${String(key)}) is read-only: setContext() gives the checks a new context`),
    getOwnPropertyDescriptor: (_, key) => {
      const state = current(key);
      return key in state ? { value: state[key], enumerable: true, configurable: true } : undefined;
    },
  });
}

export interface CheckRun {
  /** Aborted when the check times out or ends; pass it to requests so they stop too. */
  signal: AbortSignal;
  /** Extra detail printed under the check's result (only on failure, or always with VERBOSE=1). */
  note(message: string): void;
}

let running: { controller: AbortController; notes: string[] } | undefined;

/** Checks that cannot run here: pending by name, in a suite whose title says why. */
export function skipped(names: readonly string[], reason: string): void {
  describe(`skipped: ${reason}`, () => {
    for (const name of names) it.skip(name);
  });
}

/** The running check's signal and notes. */
export function checkRun(): CheckRun {
  const run = running ?? fail('checkRun() outside a check');
  return { signal: run.controller.signal, note: (message) => run.notes.push(message) };
}

/** Root beforeEach: a fresh signal and no notes. */
export function beginCheck(): void {
  running = { controller: new AbortController(), notes: [] };
}

/** Root afterEach (mocha runs it after a timeout too): aborts the signal, returns the notes. */
export function endCheck(): string[] {
  const run = running;
  running = undefined;
  run?.controller.abort();
  return run?.notes ?? [];
}

/** Writes the workspace's `.vscode/settings.json` (as an agent with a shell could); undefined removes it. */
export function workspaceSettings(ctx: CheckContext, settings: Record<string, unknown> | undefined): void {
  const dir = path.join(ctx.workspace, '.vscode');
  const file = path.join(dir, 'settings.json');
  if (!settings) {
    fs.rmSync(file, { force: true });
    return;
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(file, JSON.stringify(settings, null, 2));
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- checks read arbitrary JSON and assert on it
export function readJson<T = any>(file: string): T {
  const text = fs.readFileSync(file, 'utf8');
  try {
    return JSON.parse(text) as T;
  } catch {
    return fail(`${file} is not JSON: ${show(text)}`);
  }
}

/** The lines of the newest audit log (agent-activity.jsonl) under `root` (the sandbox's user data: its workspace storage). */
export function auditLines(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (depth > 8) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full, depth + 1);
      else if (e.name === 'agent-activity.jsonl') found.push(full);
    }
  };
  walk(root, 0);
  const newest = found.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  if (!newest) return fail(`no agent-activity.jsonl under ${root}`);
  return fs.readFileSync(newest, 'utf8').trim().split('\n');
}

/**
 * The environment of a caller outside the sandbox (an agent running marimo-pair's scripts),
 * pointed at the registry under `dirs`: never marked as a sandbox process, and with MARIMO_TOKEN
 * only when `token` is given.
 */
export function callerEnv(dirs: { home: string; stateHome: string }, token?: string | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: dirs.home, XDG_STATE_HOME: dirs.stateHome };
  delete env[MARKER_VAR];
  delete env['MARIMO_TOKEN'];
  if (token !== undefined) env['MARIMO_TOKEN'] = token ?? '';
  return env;
}

export function fileMode(file: string): number {
  return fs.statSync(file).mode & 0o777;
}

export const octal = (mode: number) => `0${mode.toString(8)}`;

/**
 * Files under the sandbox (outside our own discovery file) that hold a bridge advert: the copy the
 * extension keeps in its global storage.
 */
export function findAdvertCopies(ctx: Pick<CheckContext, 'sandbox' | 'discoveryFile'>): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (depth > 8) return;
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (!['CachedData', 'CachedExtensionVSIXs', 'node_modules', 'logs'].includes(e.name)) walk(full, depth + 1);
      } else if (e.isFile() && e.name.endsWith('.json') && full !== ctx.discoveryFile) {
        try {
          if (fs.statSync(full).size > 1_000_000) continue;
          const text = fs.readFileSync(full, 'utf8');
          if (text.includes('"agent-bridge"') && JSON.parse(text)?.server === 'agent-bridge') found.push(full);
        } catch {
          /* not JSON, or vanished */
        }
      }
    }
  };
  walk(ctx.sandbox.dirs.userData, 0);
  walk(ctx.sandbox.dirs.dataHome, 0);
  return found;
}

/** Asserts marimo's SSE framing on a finished execute stream and returns its `done` data. */
export function expectWellFramed(
  r: SseResult,
  what = 'stream',
): { success: boolean; output: { mimetype: string; data: string } } {
  eq(r.status, 200, `${what} status`);
  ok(
    String(r.headers['content-type'] ?? '').startsWith('text/event-stream'),
    `${what} content-type is ${show(r.headers['content-type'])}`,
  );
  ok(r.framingErrors.length === 0, `${what} framing: ${r.framingErrors.join('; ')}`);
  eq(r.trailing, '', `${what} bytes after the last event`);
  ok(r.ended === 'closed', `${what} did not close cleanly (${r.ended}${r.error ? `: ${r.error}` : ''})`);
  for (const e of r.events) {
    ok(['stdout', 'stderr', 'done'].includes(e.event), `${what}: unexpected event name ${show(e.event)}`);
    if (e.event !== 'done') ok(typeof e.data?.data === 'string', `${what}: ${e.event} data is not a string: ${e.rawData}`);
  }
  const dones = r.events.filter((e) => e.event === 'done');
  eq(dones.length, 1, `${what}: number of done events`);
  ok(r.events[r.events.length - 1]!.event === 'done', `${what}: done is not the last event`);
  const done = dones[0]!.data;
  ok(typeof done?.success === 'boolean', `${what}: done.success is not a boolean: ${dones[0]!.rawData}`);
  ok(
    typeof done?.output?.mimetype === 'string' && typeof done?.output?.data === 'string',
    `${what}: done.output is not {mimetype, data}: ${dones[0]!.rawData}`,
  );
  return done;
}

/** As expectWellFramed, and that the run succeeded, or failed, as `success` says. */
export function expectOutcome(r: SseResult, success: boolean, what = 'stream'): ReturnType<typeof expectWellFramed> {
  const done = expectWellFramed(r, what);
  eq(done.success, success, `${what}: done.success (stderr ${show(r.stderr)})`);
  return done;
}

/**
 * The bridge a sandbox's extension host runs, found through its discovery file (never by guessing
 * ports) once it answers /health; `accept` passes over an advert still there from an earlier one.
 */
export async function findBridge(
  sandbox: Sandbox,
  discoveryFile: string,
  accept: (advert: BridgeAdvert) => boolean = () => true,
  timeoutMs = 60_000,
): Promise<BridgeAdvert> {
  const advert = await sandbox.waitFor(
    `the bridge's discovery file ${discoveryFile}`,
    () => {
      if (!fs.existsSync(discoveryFile)) return undefined;
      const a = readJson<BridgeAdvert>(discoveryFile);
      return Number.isInteger(a.port) && a.port > 0 && accept(a) ? a : undefined;
    },
    timeoutMs,
  );
  const client = new BridgeClient(advert.url, advert.token);
  await sandbox.waitFor(
    `${advert.url}/health`,
    async () => (await client.get('/health', { timeoutMs: 2000 })).status === 200,
    30_000,
  );
  return advert;
}
