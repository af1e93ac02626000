import { BridgeError } from '../bridgeError';
import type { NotebookEntry } from '../model/cellService';
import { notebookLabel } from './refs';

/**
 * Whether the ids agents are given for a notebook's cells outlast the window. An .ipynb of
 * nbformat 4.5 or later keeps them in its file; one of an earlier version (many public notebooks
 * are 4.4) and a marimo notebook keep none: their ids are minted and kept by this VS Code, which
 * finds them again after a restart by each cell's place and text (cellIds.ts), and are nowhere in
 * the file. Every notebook view says which (`idsPersist`), and when not, why and what to do.
 */

/** How an agent asks for an .ipynb's ids to last. */
export const PERSIST_IDS_HOW = 'POST /notebooks/persist-ids (MCP persist_cell_ids)';

/** Why the cells' ids of `entry` do not last, and how to make them; undefined when they do. */
export function idsNote(entry: Pick<NotebookEntry, 'notebookType' | 'idsPersist'>): string | undefined {
  if (entry.idsPersist) return undefined;
  const only = "these ids are kept by this VS Code, not in the file (after a restart, found again by each cell's place and text)";
  if (entry.notebookType !== 'jupyter-notebook') return `Its file format keeps no cell ids: ${only}.`;
  return `nbformat < 4.5 keeps no cell ids: ${only}; ${PERSIST_IDS_HOW} asks to upgrade it.`;
}

/** The question put to the person, and its answer button. */
export function persistIdsQuestion(who: string, entry: NotebookEntry): { message: string; yes: string } {
  return {
    message:
      `${who} asks to upgrade ${notebookLabel(entry)} to nbformat 4.5, so the cell ids agents use are kept in the file ` +
      '(each cell gets an "id"; Jupyter 4.5+ and VS Code read it). The change is one undo step and is saved with the notebook.',
    yes: 'Upgrade',
  };
}

/** A notebook whose format cannot keep ids: a 409 that says so. */
export function cannotPersist(entry: NotebookEntry): BridgeError {
  return new BridgeError(
    'conflict',
    `${notebookLabel(entry)} is a ${entry.notebookType}: its file format keeps no cell ids, so there is nothing to upgrade; its cell ids are kept by this VS Code, not in the file`,
  );
}

/** The person said no, or did not answer. */
export function persistRefused(entry: NotebookEntry, answer: 'no' | 'no-answer'): BridgeError {
  return new BridgeError(
    'refused',
    answer === 'no'
      ? `The person declined to upgrade ${notebookLabel(entry)} to nbformat 4.5: its cell ids stay out of the file. Nothing was changed.`
      : `The person did not answer in time: ${notebookLabel(entry)} was not upgraded, nothing was changed. Ask again when they are there.`,
  );
}
