import type { AuditRecord } from './auditLog';

export type ExportFormat = 'py' | 'ipynb';

/** One re-runnable step: a header saying who did what, and the code. */
interface Step {
  header: string;
  code: string;
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
  if (format === 'py') {
    const cells = steps.map((s) => `# %% ${s.header}\n${s.code}\n`);
    return [`# Agent session on ${title}, exported by Agent Bridge\n`, ...cells].join('\n');
  }
  return (
    JSON.stringify(
      {
        cells: steps.map((s, i) => ({
          cell_type: 'code',
          id: `agent-${i}`,
          metadata: { agent_bridge: { action: s.header } },
          execution_count: null,
          outputs: [],
          source: s.code.split(/(?<=\n)/),
        })),
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
