/**
 * The language ids editors give Python cells: `python` (.ipynb, and every other notebook type),
 * and `mo-python`, the id marimo's VS Code extension gives its Python cells so that other Python
 * language servers leave them alone (`python` again when the person turns off its setting
 * `marimo.disableManagedLanguageFeatures`). Its markdown cells are markup `markdown`, SQL cells `sql`.
 */
export const MARIMO_PYTHON = 'mo-python';

const PYTHON_IDS: ReadonlySet<string> = new Set(['python', MARIMO_PYTHON]);

export const isPythonLanguage = (language: string): boolean => PYTHON_IDS.has(language);

/** A code cell the notebook's Python runs (and the code checks and the dependency graph read). */
export const isPythonCell = (cell: { readonly kind: string; readonly language: string }): boolean =>
  cell.kind === 'code' && isPythonLanguage(cell.language);
