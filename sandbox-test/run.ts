/**
 * The sandbox harness: `tsx sandbox-test/run.ts [--no-build] [--only TEXT] [--vsix FILE] [--extension FILE]...
 * [--refresh-screenshots]`.
 *
 * Builds and packages the extension (unless --no-build), then runs the checks as mocha suites
 * (spec reporter): the root hooks (rootHooks.ts) launch an isolated VS Code with the .vsix
 * installed, find the bridge and open the fixture notebooks; the suites below run in this order;
 * the last one (`after stop`) halts VS Code and checks that nothing was left behind; the root
 * after-hook removes its files. `--only TEXT` runs the checks whose title (suite title included)
 * contains TEXT. Exit code 1 on any failure, a failed hook included.
 *
 * Other extensions come in by path: SANDBOX_EXTENSIONS=/a.vsix:/b.vsix (and `--extension FILE`,
 * repeatable) are installed into the isolated VS Code beside ours; the checks that need one (the
 * real Jupyter extension, ms-toolsai.jupyter) run when it is among them.
 * Environment: MARIMO_PAIR_SCRIPTS=<folder with marimo-pair's scripts> enables the script checks.
 * Without them those checks are pending, by name, under a suite title that says why.
 * KEEP_LOGS=<dir> keeps the sandbox's logs; VERBOSE=1 prints check notes of passing checks too.
 * `--refresh-screenshots` (or SANDBOX_REFRESH_SCREENSHOTS=1) writes the Marketplace page's
 * screenshots into media/screenshots/ (showcase.ts); without it they go to sandbox-results/.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import Mocha from 'mocha';
import { describeExtensions, type GivenExtension, givenExtensions } from './extensions';
import { rootHooks, say } from './rootHooks';
import { REPO_ROOT } from './vscode';
import { accessChecks } from './checks/access';
import { answerChecks } from './checks/answers';
import { cellChecks } from './checks/cells';
import { cellStateChecks } from './checks/cellState';
import { chaosChecks } from './checks/chaos';
import { conformanceChecks } from './checks/conformance';
import { afterStopChecks, discoveryChecks } from './checks/discovery';
import { ipythonChecks } from './checks/ipython';
import { jupyterChecks } from './checks/jupyter';
import { kernelSandboxChecks } from './checks/kernelSandbox';
import { marimoChecks } from './checks/marimo';
import { marimoExtensionChecks } from './checks/marimoExtension';
import { marimoUnderTest } from './marimoExtension';
import * as os from 'node:os';
import { reloadChecks } from './checks/reload';
import { reviewChecks } from './checks/review';
import { presenceChecks } from './checks/presence';
import { walkthroughChecks } from './checks/walkthrough';
import { scriptChecks } from './checks/scripts';
import { securityChecks } from './checks/security';
import { staleChecks } from './checks/stale';
import { terminalChecks } from './checks/terminal';
import { twoWindowChecks } from './checks/twoWindows';
import { guardChecks } from './checks/guard';
import { identityChecks } from './checks/identity';
import { errorMessage } from '../src/core/errorMessage';

const DEFAULT_VSIX = path.join(REPO_ROOT, 'dist', 'agent-bridge.vsix');

/** `[--no-build] [--only TEXT] [--vsix FILE] [--extension FILE]... [--refresh-screenshots]`; a given .vsix is used as it is, not built. */
function options(): { build: boolean; only: string | undefined; vsix: string; extensions: GivenExtension[] } {
  const { values } = parseArgs({
    options: {
      'no-build': { type: 'boolean', default: false },
      only: { type: 'string' },
      vsix: { type: 'string' },
      extension: { type: 'string', multiple: true },
      'refresh-screenshots': { type: 'boolean', default: false },
    },
  });
  // Read by the checks that take the Marketplace page's screenshots (showcase.ts).
  if (values['refresh-screenshots']) process.env.SANDBOX_REFRESH_SCREENSHOTS = '1';
  return {
    build: !values['no-build'] && !values.vsix,
    only: values.only,
    vsix: path.resolve(values.vsix ?? DEFAULT_VSIX),
    extensions: givenExtensions(values.extension),
  };
}

function build(): void {
  say('npm run package');
  const r = spawnSync('npm', ['run', 'package'], { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`npm run package failed (status ${r.status})`);
}

/** The suites, in the order they run. */
function suites(extensions: readonly GivenExtension[]): void {
  describe('discovery', discoveryChecks);
  // First after discovery: marimo's server has only the two fixtures open, and so must the bridge.
  describe('conformance', () => conformanceChecks(extensions));
  describe('marimo API', marimoChecks);
  describe('cells', cellChecks);
  describe('answers', answerChecks);
  describe('cell state', cellStateChecks);
  describe('stale', staleChecks);
  describe('scripts', scriptChecks);
  describe('security', securityChecks);
  describe('chaos', chaosChecks);
  describe('access', accessChecks);
  describe('review', reviewChecks);
  describe('presence', presenceChecks);
  describe('walkthrough', walkthroughChecks);
  describe('guard', guardChecks);
  describe('jupyter', () => jupyterChecks(extensions));
  describe('kernel sandbox', kernelSandboxChecks);
  describe('marimo extension', marimoExtensionChecks);
  describe('terminal', terminalChecks); // it moves the bridge to a new port
  describe('ipython', ipythonChecks); // it switches the kernel's Python
  describe('two windows', twoWindowChecks); // a second window shares the harness's discovery file
  describe('identity', identityChecks); // it restarts the extension host (kernels and session ids go)
  describe('reload', () => reloadChecks(extensions)); // last with VS Code up: it restarts the window
  describe('after stop', afterStopChecks);
}

async function main(): Promise<number> {
  const args = options();
  if (args.build) build();
  if (!fs.existsSync(args.vsix)) throw new Error(`${args.vsix} not found (run without --no-build, or npm run package)`);

  const mocha = new Mocha({
    reporter: 'spec',
    timeout: 15_000, // a check's default; slower ones set their own
    slow: 2_000,
    // --only is a plain substring, not a pattern.
    ...(args.only ? { grep: new RegExp(args.only.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')) } : {}),
  });
  // Declare the suites as mocha does for a spec file: its `describe`, `it`, ... are set up by this event.
  mocha.suite.emit(Mocha.Suite.constants.EVENT_FILE_PRE_REQUIRE, globalThis, __filename, mocha);
  say(`other extensions: ${describeExtensions(args.extensions)}`);
  const packed = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-fake-marimo-'));
  process.on('exit', () => fs.rmSync(packed, { recursive: true, force: true }));
  const marimo = marimoUnderTest(args.extensions, packed);
  say(`marimo extension checks run against ${marimo.describe}`);
  rootHooks({ vsix: args.vsix, extensions: args.extensions, marimo });
  suites(args.extensions);

  const t0 = Date.now();
  // A stray async error (a socket emitting 'error' after its check ended, say) fails the runnable
  // mocha is in at the time; the root after-hook still stops VS Code.
  const stats = await new Promise<Mocha.Stats>((resolve) => {
    const runner = mocha.run(() => resolve(runner.stats!));
  });
  say(
    `${stats.passes} passed, ${stats.failures} failed, ${stats.pending} skipped; total wall time ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  if (args.only && stats.tests + stats.failures === 0) {
    say(`no check matches --only ${JSON.stringify(args.only)}`);
    return 1;
  }
  return stats.failures > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${errorMessage(err)}\n`);
    process.exit(1);
  },
);
