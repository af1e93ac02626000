/**
 * The risk scan before every run an agent starts, scratchpad or cell, whatever the transport: the
 * code is scanned where it runs (its notebook's folder and cells), the findings go to the action
 * under way (its record, its answer), and the Gate rules on them (the `ask-risky` mode asks the
 * person). A dry run scans only. No vscode here.
 */
import { dirname } from 'node:path';
import { Activity, type Gate } from '../agents/accessPolicy';
import { isPythonLanguage } from '../model/cellLanguages';
import type { NotebookEntry, OpenNotebooks } from '../model/cellService';
import { resolveNotebook } from './refs';
import { BridgeError } from '../bridgeError';
import { mergeReports, riskReport, type RiskReport, type RiskScanner, type RunCode, type ScanPlace } from '../model/riskScan';

/** Code about to run, in a language: only Python is read; other languages are findings of their own. */
export interface RunPiece extends RunCode {
  readonly language?: string;
}

export class RiskChecks {
  constructor(
    private readonly scanner: RiskScanner,
    private readonly docs: Pick<OpenNotebooks, 'list' | 'cells'>,
    /** The person's access policy (made after the cell rules, which check their runs here). */
    private readonly gate: () => Gate,
  ) {}

  /** What the scan finds in `pieces` run in `notebook` (a session id, path or uri): a dry run's answer. */
  async scan(notebook: string | undefined, pieces: readonly RunPiece[]): Promise<RiskReport> {
    const place = this.place(notebook);
    const reports = await Promise.all(
      pieces.map(async ({ code, cell, language }) => {
        if (language !== undefined && !isPythonLanguage(language)) return foreign(language, cell);
        const { findings, omitted } = await this.scanner.scan(code, place);
        return riskReport(cell === undefined ? findings : findings.map((f) => ({ ...f, cell })), omitted);
      }),
    );
    return mergeReports(reports);
  }

  /** Where code of `notebook` runs: its folder and its cells; a notebook the editor does not list, nowhere in particular. */
  private place(notebook: string | undefined): ScanPlace {
    let entry: NotebookEntry;
    try {
      entry = resolveNotebook(this.docs.list(), notebook);
    } catch (error) {
      if (error instanceof BridgeError) return { cwd: undefined, cells: [] };
      throw error;
    }
    return { cwd: entry.path === null ? undefined : dirname(entry.path), cells: this.docs.cells(entry.uri).map((c) => c.code) };
  }

  /**
   * Scans `pieces` before they run for the agent action under way and rules on them
   * (Gate.vetRisk): recorded on the action; a 403 when the person refuses. Code run outside
   * any agent action (the person's own cell using code mode) is neither recorded nor asked about.
   */
  async vet(notebook: string | undefined, pieces: readonly RunPiece[]): Promise<RiskReport> {
    const report = await this.scan(notebook, pieces);
    await this.gate().vetRisk(
      Activity.current(),
      report,
      pieces.map(({ code, cell }) => (cell === undefined ? { code } : { code, cell })),
    );
    return report;
  }
}

/** A cell in a language the scan cannot read: high, so `ask-risky` asks rather than lets it through. */
function foreign(language: string, cell: string | undefined): RiskReport {
  const reason = `a ${language} cell, which the risk scan cannot read`;
  return riskReport([
    { tier: 'high', kind: 'unscanned', pattern: language, line: 1, reason, ...(cell !== undefined && { cell }) },
  ]);
}
