/**
 * `npm run test:integration [-- --no-build] [-- --grep TEXT]`: runs test/integration/*.test.ts
 * inside the extension host of a real VS Code, with @vscode/test-electron's runTests.
 *
 * - Default (this machine, no internet): runTests launches scripts/code-launcher.sh as the "VS
 *   Code executable", which runs the sandbox launcher (code-server + headless Chromium, see
 *   sandbox-test/vscode.ts) with the extension loaded from the repository.
 * - AGENT_BRIDGE_DOWNLOAD_VSCODE=1 (a desktop with internet): runTests downloads VS Code
 *   (AGENT_BRIDGE_VSCODE_VERSION, default stable) and runs the same tests in it.
 *
 * The tests are bundled with esbuild into out/integration/index.js (vscode stays external); the
 * bundle's entry requires every test file, so adding a *.test.ts needs no other change.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { runTests } from '@vscode/test-electron';
import { FAKE_MARIMO_DIR, packFakeMarimo } from '../sandbox-test/marimoExtension';
import { errorMessage } from '../src/core/errorMessage';
import { progressLog } from '../sandbox-test/progress';

const REPO_ROOT = path.resolve(__dirname, '..');
const TEST_DIR = path.join(REPO_ROOT, 'test', 'integration');
const OUT_FILE = path.join(REPO_ROOT, 'out', 'integration', 'index.js');
const LAUNCHER = path.join(REPO_ROOT, 'scripts', 'code-launcher.sh');

const say = progressLog('test:integration');

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...testFiles(full));
    else if (e.name.endsWith('.test.ts')) out.push(full);
  }
  return out.sort();
}

async function bundleTests(): Promise<void> {
  const files = testFiles(TEST_DIR);
  if (files.length === 0) throw new Error(`no *.test.ts under ${TEST_DIR}`);
  const requires = files
    .map((f) => `  require(${JSON.stringify('./' + path.relative(TEST_DIR, f).split(path.sep).join('/'))});`)
    .join('\n');
  await build({
    stdin: {
      contents: `const { runSuites } = require('./index');\nexports.run = () => runSuites(() => {\n${requires}\n});\n`,
      resolveDir: TEST_DIR,
      sourcefile: 'integration-entry.ts',
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode'],
    outfile: OUT_FILE,
    sourcemap: 'inline',
    logLevel: 'warning',
    // mocha's parallel mode (unused here) resolves worker files at run time.
    logOverride: { 'require-resolve-not-external': 'silent' },
  });
  say(`bundled ${files.length} test file(s) into ${path.relative(REPO_ROOT, OUT_FILE)}`);
}

async function main(): Promise<number> {
  const { values: args } = parseArgs({
    options: { grep: { type: 'string' }, 'no-build': { type: 'boolean', default: false } },
  });
  if (!args['no-build']) {
    say('npm run build');
    const r = spawnSync('npm', ['run', 'build'], { cwd: REPO_ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) throw new Error(`npm run build failed (status ${r.status})`);
  }
  await bundleTests();

  const scratch = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-it-')));
  const workspace = path.join(scratch, 'workspace');
  fs.cpSync(path.join(REPO_ROOT, 'sandbox-test', 'fixtures'), workspace, { recursive: true });
  const env: Record<string, string> = { AGENT_BRIDGE_DISCOVERY_FILE: path.join(scratch, 'bridge.json') };
  if (args.grep) env['AGENT_BRIDGE_TEST_GREP'] = args.grep;
  const download = process.env['AGENT_BRIDGE_DOWNLOAD_VSCODE'] === '1';
  try {
    const code = await runTests({
      ...(download ? { version: process.env['AGENT_BRIDGE_VSCODE_VERSION'] || 'stable' } : { vscodeExecutablePath: LAUNCHER }),
      // Desktop VS Code loads several development extensions; the sandbox installs the fake (the
      // web workbench loads a single extensionDevelopmentPath: its payload is a Map).
      extensionDevelopmentPath: download ? [REPO_ROOT, FAKE_MARIMO_DIR] : REPO_ROOT,
      extensionTestsPath: OUT_FILE,
      extensionTestsEnv: env,
      launchArgs: download
        ? [
            workspace,
            '--disable-extensions',
            `--user-data-dir=${path.join(scratch, 'user-data')}`,
            `--extensions-dir=${path.join(scratch, 'extensions')}`,
          ]
        : [workspace, `--install-vsix=${packFakeMarimo(scratch)}`],
    });
    return code;
  } catch (err) {
    say(`failed: ${errorMessage(err)}`);
    return 1;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${errorMessage(err)}\n`);
    process.exit(1);
  },
);
