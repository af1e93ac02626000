import { strict as assert } from 'node:assert';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { renderSession, runSteps } from '../../src/access/export';
import type { AgentRun } from '../../src/core/runs/runHistory';

/** The stack's venv (npm run setup), where marimo is pinned; without it, the system's python3. */
// Absolute: the app runs with its own folder as the working directory.
const VENV_PYTHON = resolve(process.env['AGENT_BRIDGE_STACK'] ?? '.vscode-test', 'venv', 'bin', 'python');
const PYTHON = existsSync(VENV_PYTHON) ? VENV_PYTHON : 'python3';

const run = (id: string, startedAt: string, code: string, output = ''): AgentRun => ({
  id,
  client: 'agent #1 (says it is tester)',
  owner: 'o',
  transport: 'http',
  label: 'scratchpad run',
  notebook: '/w/analysis.py',
  code,
  codeHash: 'h',
  status: 'succeeded',
  durationMs: 3,
  startedAt,
  detail: '',
  output,
  risk: null,
});

describe('agent runs exported as a marimo app', function () {
  this.timeout(60_000);
  let dir: string;
  let file: string;
  const source = renderSession(
    runSteps([
      run('run_b', '2026-01-01T00:00:02.000Z', 'def f(x):\n    """Doubles."""\n    return 2 * x\n\n\nprint(f(y))\n', '4\n'),
      run('run_a', '2026-01-01T00:00:01.000Z', 'y = 2\ntext = """a \\\\ "quoted" ``` line"""', 'done "here" \\ ```\n'),
      run('run_c', '2026-01-01T00:00:03.000Z', ''),
    ]),
    'marimo',
    'agent runs',
  );

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'marimo-export-'));
    file = join(dir, 'agent_runs.py');
    writeFileSync(file, source);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('writes marimo’s file format: the app, a markdown cell then a code cell per run, oldest first', () => {
    assert.match(source, /^import marimo\n+app = marimo\.App\(\)\n/);
    assert.match(source, /\nif __name__ == "__main__":\n {4}app\.run\(\)\n$/);
    assert.equal(source.match(/^@app\.cell$/gm)?.length, 6); // mo, then a note per run and the code of those that had any
    assert.ok(source.indexOf('    y = 2\n') < source.indexOf('    def f(x):\n        """Doubles."""\n        return 2 * x\n'));
    assert.match(source, /def _\(mo\):\n {4}mo\.md\(r"""\n {4}\*\*scratchpad run\*\* by agent #1/);
  });

  it('parses as Python', () => {
    execFileSync(PYTHON, ['-c', 'import ast,sys; ast.parse(open(sys.argv[1]).read())', file]);
  });

  it('is read by marimo as a notebook with no errors', function () {
    if (spawnSync(PYTHON, ['-c', 'import marimo']).status !== 0) {
      console.log(`      marimo is not installed in ${PYTHON} (npm run setup puts it in the stack's venv): not checked`);
      this.skip();
    }
    // `marimo check --strict` fails on a file marimo cannot read as a notebook, and on its warnings
    // but one: MF001 asks for `__generated_with`, the marimo version that wrote the file (none did).
    const check = spawnSync(PYTHON, ['-m', 'marimo', 'check', '--strict', '--ignore', 'MF001', file], { encoding: 'utf8' });
    assert.equal(check.status, 0, `marimo check: ${check.stdout}${check.stderr}`);
    // Exported as a script, marimo orders the cells by what they define and use: `y` before `f(y)`.
    const script = execFileSync(PYTHON, ['-m', 'marimo', '-y', 'export', 'script', file], { encoding: 'utf8' });
    assert.ok(script.indexOf('y = 2') < script.indexOf('print(f(y))'), script);
    const ran = spawnSync(PYTHON, [file], { encoding: 'utf8', cwd: dir });
    assert.equal(ran.status, 0, ran.stderr);
    assert.match(ran.stdout, /^4$/m);
  });
});
