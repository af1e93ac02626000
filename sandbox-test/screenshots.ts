/** Screenshots of what the person sees, saved to sandbox-results/ for a human to look at. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { REPO_ROOT } from './stack';

const RESULTS_DIR = path.join(REPO_ROOT, 'sandbox-results');

/** Saves the page as sandbox-results/`name` and notes where. */
export async function screenshot(page: Page, name: string, note: (m: string) => void): Promise<void> {
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, name);
  await page.screenshot({ path: file });
  note(`screenshot ${path.relative(REPO_ROOT, file)}`);
}
