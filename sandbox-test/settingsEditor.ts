/**
 * The person's own settings, changed as the person would: in VS Code's Settings editor. The
 * settings that govern agents are machine- or application-scoped, so no workspace file sets them;
 * in code-server's window (a remote one) a machine-scoped setting lives in the Remote tab, whose
 * file is `<user-data>/Machine/settings.json`. Each change waits until that file holds it: closing
 * the editor earlier can lose the write.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { sleep } from '../src/core/sleep';

/** Opens the Settings editor on `key`'s Remote tab; the row of that setting. */
async function openSetting(page: Page, key: string) {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.type('Preferences: Open User Settings');
  // Not the "(JSON)" one; a recently used command's row also says so, hence the exact label.
  const command = page.getByText('Preferences: Open User Settings', { exact: true });
  await page.locator('.quick-input-widget .monaco-list-row').filter({ has: command }).first().click({ timeout: 20_000 });
  // The search box is a small editor: click it, select what it holds, type over it.
  const search = page.locator('.settings-editor .suggest-input-container').first();
  await search.waitFor({ state: 'visible', timeout: 20_000 });
  await search.click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.type(key);
  const tabs = page.locator('.settings-editor .settings-tabs-widget');
  await tabs
    .locator('.action-label', { hasText: /^Remote/ })
    .first()
    .click();
  await tabs
    .locator('.action-label.checked', { hasText: /^Remote/ })
    .first()
    .waitFor({ timeout: 10_000 });
  // Only once the search has filtered the list down to one setting.
  await page.locator('.settings-editor', { hasText: '1 Setting Found' }).first().waitFor({ timeout: 20_000 });
  return page.locator('.settings-editor .setting-item-contents').first();
}

/** Waits until the Remote tab's settings.json holds `value` for `key` (absent reads as `fallback`). */
async function saved(userData: string, key: string, value: unknown, fallback: unknown): Promise<void> {
  const file = path.join(userData, 'Machine', 'settings.json');
  const read = () => (fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8') || '{}')[key] ?? fallback) : fallback);
  for (const t0 = Date.now(); read() !== value; await sleep(100))
    if (Date.now() > t0 + 10_000) throw new Error(`${file} never said ${key}: ${JSON.stringify(value)}`);
}

/** Closes the editor (a modal here): Escape leaves a focused input first, then closes. */
async function close(page: Page): Promise<void> {
  const editor = page.locator('.settings-editor').first();
  for (let attempt = 0; attempt < 3 && (await editor.isVisible()); attempt++) {
    await page.keyboard.press('Escape');
    await editor.waitFor({ state: 'hidden', timeout: 2_000 }).catch(() => undefined);
  }
  if (await editor.isVisible()) throw new Error('the Settings editor did not close on Escape');
}

/**
 * Sets a boolean setting's checkbox to `on`; `shot` runs before the editor closes (a screenshot).
 * `byDefault`: the setting's default (VS Code drops a setting set back to it from the file).
 */
export async function setBoolean(
  page: Page,
  userData: string,
  key: string,
  on: boolean,
  shot?: () => Promise<void>,
  byDefault = false,
): Promise<void> {
  const row = await openSetting(page, key);
  const checkbox = row.locator('.setting-value-checkbox');
  const want = String(on);
  if ((await checkbox.getAttribute('aria-checked')) !== want) await checkbox.click();
  await row.locator(`.setting-value-checkbox[aria-checked="${want}"]`).waitFor({ timeout: 10_000 });
  await saved(userData, key, on, byDefault);
  await shot?.();
  await close(page);
}

/** Types `value` into a string setting ('' puts back the default of ""). */
export async function setText(page: Page, userData: string, key: string, value: string): Promise<void> {
  const row = await openSetting(page, key);
  // The list may render the row anew as its search settles, losing what was typed into the old
  // one: typed again while the row (found anew) does not show it.
  for (let attempt = 1; ; attempt++) {
    const input = row.locator('input').first();
    await input.click();
    await page.keyboard.press('ControlOrMeta+A');
    if (value) await page.keyboard.type(value);
    else await page.keyboard.press('Backspace');
    try {
      await saved(userData, key, value, '');
      break;
    } catch (error) {
      if (attempt === 3 || (await input.inputValue()) === value) throw error;
    }
  }
  await close(page);
}
