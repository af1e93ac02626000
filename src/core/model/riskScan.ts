/**
 * The static risk scan of the code an agent is about to run: what it found (each finding with
 * its tier, pattern, line and a one-line reason), how a run's findings read in an answer, a
 * prompt and a record, and which of them the person is asked about in the `ask-risky` mode. The
 * reading itself is Python's (src/kernels/risk_scan.py, through a RiskScanner). A scan is a
 * warning light, not a boundary: code can hide what it does from any static reading. No vscode.
 */

export type RiskTier = 'critical' | 'high' | 'medium';

const TIERS: readonly RiskTier[] = ['critical', 'high', 'medium'];

export interface RiskFinding {
  readonly tier: RiskTier;
  /** What it does: process, dynamic-code, native-code, write, delete, network, secret-read, environment, unpickle, install, ... */
  readonly kind: string;
  /** What in the code does it: `subprocess.run`, `open`, `!`, `%pip`, `.to_csv`. */
  readonly pattern: string;
  /** Its line in the code (1-based). */
  readonly line: number;
  readonly reason: string;
  /** The cell whose code it is in, for a cell run. */
  readonly cell?: string;
}

/** What the scan of one run found: its highest tier (null: nothing) and its findings, most severe first. */
export interface RiskReport {
  readonly level: RiskTier | null;
  readonly findings: readonly RiskFinding[];
  /** Findings past those listed. */
  readonly omitted?: number;
}

/** The code of one run: a scratchpad's, or each cell's of a cell run. */
export interface RunCode {
  readonly code: string;
  readonly cell?: string;
}

/** The code of a run as one text: each cell's under a `# cell <id>` line. */
export const joinCode = (pieces: readonly RunCode[]) =>
  pieces.map((p) => (p.cell === undefined ? p.code : `# cell ${p.cell}\n${p.code}`)).join('\n\n');

/** Where the code runs, for paths and names: the kernel's folder and the notebook's cells. */
export interface ScanPlace {
  /** The kernel's working folder (the notebook's); undefined: the first workspace folder. */
  readonly cwd: string | undefined;
  /** The notebook's cells' code: names they import are known when reading the code. */
  readonly cells: readonly string[];
}

/** Reads code with Python's parser (risk_scan.py). Never throws: a scan that could not run is a finding. */
export interface RiskScanner {
  scan(code: string, place: ScanPlace): Promise<{ findings: readonly RiskFinding[]; omitted?: number }>;
}

export const NO_RISK: RiskReport = Object.freeze({ level: null, findings: [] });

/** A report of findings, most severe first (in code order within a tier). */
export function riskReport(findings: readonly RiskFinding[], omitted = 0): RiskReport {
  const sorted = [...findings].sort((a, b) => TIERS.indexOf(a.tier) - TIERS.indexOf(b.tier));
  return { level: sorted[0]?.tier ?? null, findings: sorted, ...(omitted > 0 && { omitted }) };
}

/** Several reports as one (a run of several cells, an action of several runs); each finding once. */
export function mergeReports(reports: readonly RiskReport[]): RiskReport {
  const seen = new Set<string>();
  const findings = reports
    .flatMap((r) => r.findings)
    .filter((f) => {
      const key = `${f.line}\n${findingKey(f)}`;
      return !seen.has(key) && seen.add(key);
    });
  return riskReport(
    findings,
    reports.reduce((n, r) => n + (r.omitted ?? 0), 0),
  );
}

/** The findings that make the `ask-risky` mode ask: critical and high. */
export const asksPerson = (f: RiskFinding) => f.tier === 'critical' || f.tier === 'high';

/** What "Allow this kind for 10 minutes" allows: a finding's kind and pattern, whatever its line. */
export const kindOf = (f: RiskFinding) => `${f.kind}:${f.pattern}`;

/** A finding as the person allowed it: changed code (another command for the same call) is asked about again. */
export const findingKey = (f: RiskFinding) => `${f.cell ?? ''}\n${f.kind}\n${f.pattern}\n${f.reason}`;

/** Most kinds one client holds grants for (a client allowing kind after kind keeps its newest). */
const KINDS_PER_CLIENT = 64;

/**
 * "Allow this kind for 10 minutes": per credential (what only that client holds, never a name),
 * the kinds of finding its runs may carry without asking, until when.
 */
export class KindGrants {
  private readonly byCredential = new Map<string, Map<string, number>>();

  grant(credential: string, kinds: readonly string[], until: number): void {
    const kept = this.byCredential.get(credential) ?? new Map<string, number>();
    for (const kind of kinds) {
      kept.delete(kind);
      kept.set(kind, until);
    }
    while (kept.size > KINDS_PER_CLIENT) kept.delete(kept.keys().next().value!);
    this.byCredential.set(credential, kept);
  }

  allows(credential: string | undefined, kind: string, now: number): boolean {
    if (credential === undefined) return false;
    const until = this.byCredential.get(credential)?.get(kind);
    return until !== undefined && until > now;
  }
}

/** One finding on one line: `line 3: subprocess.run (critical): starts a program: ls`. */
export function describeFinding(f: RiskFinding): string {
  const where = f.cell ? `cell ${f.cell} line ${f.line}` : `line ${f.line}`;
  return `${where}: ${f.pattern} (${f.tier}): ${f.reason}`;
}

/** The findings in one line each, at most `max`, then how many more. */
export function describeFindings(report: RiskReport, max = 5): string[] {
  const lines = report.findings.slice(0, max).map(describeFinding);
  const more = report.findings.length - lines.length + (report.omitted ?? 0);
  return more > 0 ? [...lines, `and ${more} more`] : lines;
}

/** The answer's `risk`: present only when the scan found something. */
export const riskField = (report: RiskReport | undefined) => (report?.findings.length ? { risk: report } : {});

/**
 * Only the import lines and plain name bindings at the top of a cell: all the scan needs of the
 * notebook's other cells (what `np`, `sp` stand for), at a fraction of their size.
 */
export function namesOfCell(code: string): string {
  const out: string[] = [];
  const lines = code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^(import|from)\s/.test(line)) {
      out.push(line);
      // A parenthesized import goes on to its closing parenthesis.
      if (line.includes('(') && !line.includes(')'))
        while (++i < lines.length) {
          out.push(lines[i]!);
          if (lines[i]!.includes(')')) break;
        }
    } else if (/^[A-Za-z_]\w*\s*=\s*[A-Za-z_][\w.]*\s*$/.test(line)) out.push(line);
  }
  return out.join('\n');
}
