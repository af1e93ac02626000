/**
 * Checks of an agent's Python before it is written into a cell: compiled by the notebook's
 * Python (kernel_inspect.py's analysis, IPython syntax accepted through IPython's own input
 * transformer where there is IPython), so a syntax error is refused with its line and column and
 * the cell keeps what it had. From the same analysis of every Python cell: names the new code
 * uses that no cell defines, and names it defines that another cell defines too. These are
 * warnings, or refusals with `strict`.
 */
import { BridgeError } from '../bridgeError';
import { isPythonCell } from './cellLanguages';

export interface SyntaxProblem {
  readonly message: string;
  readonly line: number;
  readonly column: number;
  readonly text?: string;
}

/** A name a cell changes in place (or updates, `x += 1`), and the first form that does. */
export interface NameChange {
  readonly name: string;
  /** `df['c'] = …`, `lst.append(…)`, `df.drop(…, inplace=True)`, `x += …` */
  readonly how: string;
  /** Only by a method called on the name itself (on a module, that is a function: `np.append(a, 1)`). */
  readonly method?: boolean;
}

/** One cell's top-level definitions, the globals it uses and those it changes in place, why it does not compile, or why it could not be analysed. */
export interface CellAnalysis {
  readonly id: string;
  readonly defines?: readonly string[];
  readonly uses?: readonly string[];
  readonly mutates?: readonly NameChange[];
  /** Names it binds by import. */
  readonly imports?: readonly string[];
  readonly error?: SyntaxProblem;
  /** The parser could not take it ("too deeply nested to check"): nothing is known of its names. */
  readonly unchecked?: string;
}

/** Analyzes Python cells with the notebook's Python; undefined when no Python can (the check is then skipped). */
export interface CodeAnalyzer {
  analyze(notebookUri: string, cells: readonly { id: string; code: string }[]): Promise<readonly CellAnalysis[] | undefined>;
}

export interface PlannedCode {
  readonly id: string;
  readonly kind: string;
  readonly language: string;
  readonly code: string;
  /** New code the write puts in (not a cell only moved). */
  readonly written: boolean;
}

export type CodeWarnings = ReadonlyMap<string, readonly string[]>;

/**
 * Compiles the cells a write changes, in the notebook the write leaves. Throws 400 on a syntax
 * error (nothing is written), on written code that could not be analysed unless `strict` is
 * false, or with `strict` on a warning; else returns the warnings per cell id. A cell that could
 * not be analysed leaves every other cell's check in force.
 */
export async function checkWrittenCode(
  analyzer: CodeAnalyzer | undefined,
  notebookUri: string,
  layout: readonly PlannedCode[],
  strict: boolean | undefined,
): Promise<CodeWarnings> {
  const python = layout.filter(isPythonCell);
  const written = python.filter((c) => c.written && c.code.trim());
  if (!analyzer || !written.length) return new Map();
  const analyses = await analyzer.analyze(
    notebookUri,
    python.map((c) => ({ id: c.id, code: c.code })),
  );
  if (!analyses) return new Map();
  const byId = new Map(analyses.map((a) => [a.id, a]));
  const unchecked = new Map<string, string>();
  for (const cell of written) {
    const { error, unchecked: why } = byId.get(cell.id) ?? {};
    const index = layout.indexOf(cell);
    if (why !== undefined && strict !== false)
      throw new BridgeError(
        'bad_input',
        `The code for cell ${cell.id} (index ${index}) could not be checked: ${why}; nothing was changed. ` +
          `Split it into smaller statements, or send "strict": false to write it unchecked`,
        { cell: cell.id, index, unchecked: why },
      );
    if (why !== undefined) unchecked.set(cell.id, `not checked: ${why}`);
    if (!error) continue;
    throw new BridgeError(
      'bad_input',
      `Syntax error in the code for cell ${cell.id} (index ${index}), line ${error.line}, column ${error.column}: ${error.message}; nothing was changed`,
      { cell: cell.id, index, line: error.line, column: error.column, ...(error.text && { text: error.text }) },
    );
  }
  const warnings = codeWarnings(
    python.map((c) => byId.get(c.id)).filter((a) => a !== undefined),
    new Set(written.map((c) => c.id)),
  );
  if (strict && warnings.size)
    throw new BridgeError('bad_input', `Refused ("strict"): ${[...warnings.values()].flat().join('; ')}; nothing was changed`, {
      warnings: Object.fromEntries(warnings),
    });
  for (const [id, note] of unchecked) warnings.set(id, [note, ...(warnings.get(id) ?? [])]);
  return warnings;
}

/** Other cells a warning names; the rest are counted ("and 994 more"), so answers grow with the cells, not their square. */
const NAMED_CELLS = 5;

/** For each cell of `of`: names it uses that no cell defines, and names it defines that another cell defines too. */
export function codeWarnings(analyses: readonly CellAnalysis[], of: ReadonlySet<string>): Map<string, string[]> {
  const definers = new Map<string, string[]>();
  for (const a of analyses)
    for (const name of a.defines ?? []) {
      const list = definers.get(name);
      if (list) list.push(a.id);
      else definers.set(name, [a.id]);
    }
  // A cell the parser could not take may define any name: a name defined nowhere says so.
  const blind = namedCells(analyses.filter((a) => a.unchecked !== undefined).map((a) => a.id));
  const nowhere = blind ? `defined in no cell (cell ${blind} could not be checked)` : 'defined in no cell';
  const warnings = new Map<string, string[]>();
  for (const a of analyses) {
    if (!of.has(a.id)) continue;
    const found: string[] = [];
    const undefinedNames = (a.uses ?? []).filter((n) => !definers.has(n));
    if (undefinedNames.length) found.push(`uses ${undefinedNames.join(', ')}, ${nowhere}`);
    for (const name of a.defines ?? []) {
      const others = namedCells(definers.get(name)!, a.id);
      if (others) found.push(`defines ${name}, also defined in cell ${others}`);
    }
    if (found.length) warnings.set(a.id, found);
  }
  return warnings;
}

/** `ids` but `except`, as a warning names them: the first NAMED_CELLS, then how many more ("" for none). */
function namedCells(ids: readonly string[], except?: string): string {
  const named: string[] = [];
  let count = 0;
  for (const id of ids) {
    if (id === except) continue;
    if (named.length < NAMED_CELLS) named.push(id);
    count++;
  }
  return count > NAMED_CELLS ? `${named.join(', ')} and ${count - NAMED_CELLS} more` : named.join(', ');
}
