import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AUDIT_FILE, AuditLog, readAudit, ROTATE_AT_BYTES, type AuditRecord } from '../../src/access/auditLog';
import { renderSession, sessionSteps } from '../../src/access/export';
import type { Entry } from '../../src/access/record';
import type { ActionOutcome, AccessKind } from '../../src/core/agents/accessPolicy';
import { silentLog } from './fakes/app';

const URI = 'file:///work/a.ipynb';
const TOKEN = 'f'.repeat(64);

/** An ended entry as the activity store hands it to the log (the notebook and cells are fakes). */
function entry(code: string, kind: AccessKind = 'execute', outcome: ActionOutcome = 'succeeded', changes: string[] = []): Entry {
  return {
    action: {
      id: 1,
      transport: 'http',
      client: 'unit-agent (unverified)',
      about: 'an agent that says it is unit-agent, with no credential of the bridge: its name is only a claim',
      claim: 'unit-agent',
      credential: undefined,
      owner: undefined,
      reader: { key: 'claim:unit-agent', label: 'unit-agent (unverified)' },
      kind,
      label: kind === 'execute' ? 'scratchpad run' : 'cell edit',
      notebook: 's_aaaaaa',
      code,
      startedAt: Date.UTC(2026, 10, 23, 12, 0, 0),
      summary: code.slice(0, 20),
    },
    end: { outcome, durationMs: 1.4, detail: '', output: '' },
    notebook: { uri: { toString: () => URI } } as Entry['notebook'],
    notebookLabel: '/work/a.ipynb',
    changes: changes.map((after, index) => ({ cell: { index } as never, before: '', after, created: true })),
  };
}

describe('audit log (JSON Lines file)', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'audit-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a line appended while a write is under way leaves the log idle once written (flushed() cannot spin)', async () => {
    const log = new AuditLog(dir, () => null, silentLog);
    log.append(entry('a = 1'));
    const first = log.flushed(); // a write starts
    log.append(entry('b = 2')); // queued while it runs: taken by that write, and a timer set
    await first;
    await new Promise((resolve) => setTimeout(resolve, 250)); // the timer fires with nothing left to write
    // With a drain of nothing, \`writing\` stayed a settled promise and flushed() looped on it forever.
    assert.equal((log as unknown as { writing: unknown }).writing, undefined);
    await log.flushed();
    log.dispose();
    assert.equal(fs.readFileSync(path.join(dir, AUDIT_FILE), 'utf8').trim().split('\n').length, 2);
  });

  it('writes one line per action with its hash and outcome, and never the token', async () => {
    const log = new AuditLog(dir, () => TOKEN, silentLog);
    log.append(entry('print(1)'));
    log.append(entry(`token = "${TOKEN}"`));
    await log.flushed();
    log.dispose();
    const text = fs.readFileSync(path.join(dir, AUDIT_FILE), 'utf8');
    assert.ok(!text.includes(TOKEN));
    const [first, second] = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as AuditRecord);
    assert.equal(first!.sha256, createHash('sha256').update('print(1)').digest('hex'));
    assert.deepEqual(
      [first!.client, first!.notebookUri, first!.outcome, first!.durationMs, first!.time],
      ['unit-agent (unverified)', URI, 'succeeded', 1, '2026-11-23T12:00:00.000Z'],
    );
    assert.match(first!.about ?? '', /says it is unit-agent, with no credential/);
    assert.equal(second!.code, 'token = "[token]"');
  });

  it('writes through one open file, and creates it again when someone removed it', async () => {
    const log = new AuditLog(dir, () => null, silentLog, 0);
    log.append(entry('first()'));
    await log.flushed();
    fs.rmSync(path.join(dir, AUDIT_FILE));
    log.append(entry('second()'));
    await log.flushed();
    assert.deepEqual(
      (await readAudit(dir)).map((r) => r.code),
      ['second()'],
    );
    log.dispose();
    assert.equal((fs.statSync(path.join(dir, AUDIT_FILE)).mode & 0o777).toString(8), '600');
  });

  it('writes the batch still gathering when the window closes (dispose), before it returns', () => {
    const log = new AuditLog(dir, () => null, silentLog);
    log.append(entry('last()'));
    log.dispose();
    const text = fs.readFileSync(path.join(dir, AUDIT_FILE), 'utf8');
    assert.equal((JSON.parse(text) as AuditRecord).code, 'last()');
  });

  it('rotates past the size limit, keeping two older files, and reads them back in order', async () => {
    const log = new AuditLog(dir, () => null, silentLog);
    const big = (n: number) => `# ${n}\n${'x'.repeat(Math.ceil(ROTATE_AT_BYTES / 2.5))}`;
    for (let n = 0; n < 8; n++) {
      log.append(entry(big(n)));
      await log.flushed();
    }
    log.dispose();
    const files = fs.readdirSync(dir).sort();
    assert.deepEqual(files, ['agent-activity.1.jsonl', 'agent-activity.2.jsonl', 'agent-activity.jsonl']);
    for (const f of files) assert.ok(fs.statSync(path.join(dir, f)).size <= ROTATE_AT_BYTES);
    const codes = (await readAudit(dir)).map((r) => r.code.split('\n')[0]);
    assert.deepEqual(codes, ['# 2', '# 3', '# 4', '# 5', '# 6', '# 7']);
  });
});

describe('Export Agent Session', () => {
  const records = (): AuditRecord[] => {
    const base = { client: 'a', transport: 'http', notebook: null, summary: '', sha256: '', durationMs: 1, detail: '' } as const;
    return [
      {
        ...base,
        time: 't1',
        notebookUri: URI,
        kind: 'execute',
        action: 'scratchpad run',
        code: 'print(1)',
        outcome: 'succeeded',
        cells: [],
      },
      {
        ...base,
        time: 't2',
        notebookUri: 'file:///other.ipynb',
        kind: 'execute',
        action: 'scratchpad run',
        code: 'other()',
        outcome: 'succeeded',
        cells: [],
      },
      {
        ...base,
        time: 't3',
        notebookUri: URI,
        kind: 'execute',
        action: 'scratchpad run',
        code: 'refused()',
        outcome: 'refused',
        cells: [],
      },
      {
        ...base,
        time: 't4',
        notebookUri: URI,
        kind: 'edit',
        action: 'batch',
        code: '{}',
        outcome: 'succeeded',
        cells: [
          { index: 0, before: 'x = 1', after: 'x = 2' },
          { index: 3, before: '', after: 'y = x * 2\nprint(y)' },
        ],
      },
      {
        ...base,
        time: 't5',
        notebookUri: URI,
        kind: 'run',
        action: 'cell run',
        code: '{"ref":"c1"}',
        summary: '{"ref":"c1"}',
        outcome: 'failed',
        cells: [],
      },
    ];
  };

  it("keeps one notebook's actions in order: scratchpad code, the text edits left, runs as comments", () => {
    const steps = sessionSteps(records(), URI);
    assert.deepEqual(
      steps.map((s) => s.code),
      ['print(1)', 'x = 2', 'y = x * 2\nprint(y)', '# {"ref":"c1"}'],
    );
    assert.match(steps[2]!.header, /t4 a: batch \(succeeded\), cell 4/);
  });

  it('renders a .py with # %% cells and an .ipynb with one code cell per step', () => {
    const steps = sessionSteps(records(), URI);
    const py = renderSession(steps, 'py', 'a.ipynb');
    assert.match(py, /^# Agent session on a\.ipynb/);
    assert.equal(py.match(/^# %% /gm)?.length, 4);
    const nb = JSON.parse(renderSession(steps, 'ipynb', 'a.ipynb')) as { nbformat: number; cells: { source: string[] }[] };
    assert.equal(nb.nbformat, 4);
    assert.deepEqual(nb.cells[2]!.source, ['y = x * 2\n', 'print(y)']);
  });
});
