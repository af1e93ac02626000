import type { AuditRecord } from './auditLog';
import type { AgentRun } from '../core/runs/runHistory';
import { describeFindings } from '../core/model/riskScan';

/** `py`: percent-format script; `ipynb`: Jupyter; `marimo`: a marimo app (`.py`), for a marimo notebook's runs. */
export type ExportFormat = 'py' | 'ipynb' | 'marimo';

/** One re-runnable step: a header saying who did what, and the code (with a note above it and its output, for a run). */
interface Step {
  header: string;
  code: string;
  /** Markdown before the code: who ran it, when, and what the risk scan found. */
  note?: string;
  /** What it printed (the head kept). */
  output?: string;
}

/** Agent runs, oldest first, as steps: a note with client, time, status and risk, the code, the output. */
export function runSteps(runs: readonly AgentRun[]): Step[] {
  return [...runs]
    .sort((a, b) => a.startedAt.localeCompare(b.startedAt))
    .map((r) => {
      const header = `${r.startedAt} ${r.client}: ${r.label} (${r.status})`;
      const risk = r.risk?.findings.length ? describeFindings(r.risk, 10).map((l) => `- risk: ${l}`) : ['- risk: nothing found'];
      const note = [
        `**${r.label}** by ${r.client}, ${r.startedAt} — ${r.status}, ${r.durationMs} ms (run \`${r.id}\`)`,
        '',
        ...risk,
      ].join('\n');
      return { header, code: r.code, note, ...(r.output && { output: r.output }) };
    });
}

/**
 * A notebook's agent actions, in order, as steps someone can run again: scratchpad code as it
 * was sent, and the text each edit left in the cells it created or changed. Refused actions,
 * reads and runs of existing cells carry no code of their own and are left out (runs stay as a
 * comment, so the order of events reads true), and so are the lines that announce a batch in steps.
 */
export function sessionSteps(records: readonly AuditRecord[], notebookUri: string): Step[] {
  const steps: Step[] = [];
  for (const r of records) {
    if (r.notebookUri !== notebookUri || r.outcome === 'refused' || r.outcome === 'applying') continue;
    const header = `${r.time} ${r.client}: ${r.action} (${r.outcome})`;
    if (r.kind === 'execute') steps.push({ header, code: r.code });
    else if (r.kind === 'edit')
      for (const cell of r.cells) steps.push({ header: `${header}, cell ${cell.index + 1}`, code: cell.after });
    else steps.push({ header, code: `# ${r.summary.replace(/\n/g, ' ')}` });
  }
  return steps;
}

export function renderSession(steps: readonly Step[], format: ExportFormat, title: string): string {
  if (format === 'marimo') return renderMarimo(steps, title);
  if (format === 'py') {
    const cells = steps.map((s) => `# %% ${s.header}\n${s.note ? `${comment(s.note)}\n` : ''}${s.code}\n`);
    return [`# Agent session on ${title}, exported by Agent Bridge\n`, ...cells].join('\n');
  }
  return (
    JSON.stringify(
      {
        cells: steps.flatMap((s, i) => [
          ...(s.note ? [{ cell_type: 'markdown', id: `agent-${i}-note`, metadata: {}, source: lines(s.note) }] : []),
          {
            cell_type: 'code',
            id: `agent-${i}`,
            metadata: { agent_bridge: { action: s.header } },
            execution_count: null,
            outputs: s.output ? [{ output_type: 'stream', name: 'stdout', text: lines(s.output) }] : [],
            source: lines(s.code),
          },
        ]),
        metadata: {
          kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
          language_info: { name: 'python' },
          agent_bridge: { exported_from: title },
        },
        nbformat: 4,
        nbformat_minor: 5,
      },
      null,
      1,
    ) + '\n'
  );
}

const lines = (text: string) => text.split(/(?<=\n)/);
const comment = (text: string) => text.replace(/^/gm, '# ');

/**
 * Steps as a marimo app: a cell importing `mo`, then per step a markdown cell (`mo.md`) with its
 * note and output, and a cell with its code. Each cell is a function whose body is the code indented,
 * as marimo writes its own files; marimo works out what cells define and use when it reads the file.
 */
function renderMarimo(steps: readonly Step[], title: string): string {
  const cell = (args: string, body: string, returns = '') =>
    `@app.cell\ndef _(${args}):\n${indent(body)}\n    return${returns}\n`;
  const md = (s: Step) => {
    const text = [s.note ?? s.header, ...(s.output ? ['', '```text', s.output.replace(/\n$/, ''), '```'] : [])].join('\n');
    // As marimo writes markdown: a raw triple-quoted string, indented (it dedents it); text holding
    // `"""`, which a raw one cannot, is escaped instead.
    const raw = !text.includes('"""');
    return cell('mo', `mo.md(${raw ? 'r' : ''}"""\n${raw ? text : text.replace(/[\\"]/g, '\\$&')}\n""")`);
  };
  return [
    'import marimo\n',
    `app = marimo.App()\n# Agent runs on ${title.replace(/\n/g, ' ')}, exported by Agent Bridge\n`,
    cell('', 'import marimo as mo', ' (mo,)'),
    ...steps.flatMap((s) => [md(s), ...(s.code.trim() ? [cell('', s.code.trimEnd())] : [])]),
    'if __name__ == "__main__":\n    app.run()\n',
  ].join('\n\n');
}

/** Code as a function body: every non-blank line four spaces in (blank lines stay blank). */
const indent = (code: string) => code.replace(/^(?=.*\S)/gm, '    ');
