/**
 * The Marketplace page's screenshots (README.marketplace.md), taken by the checks that drive what
 * they show. That page's column is about 750-900 px wide and scales a wider picture down, so a
 * showcase shot is taken in a window narrower than the harness's 1280×720 (the workbench lays
 * itself out again: side bar, notebook and diff all in 1024 px) at twice the pixel density, so
 * that its text reads as it does in VS Code once scaled into that column, sharp on a dense screen.
 * It goes to `media/screenshots/` (shipped in the .vsix) when the harness runs with
 * `--refresh-screenshots` (or SANDBOX_REFRESH_SCREENSHOTS=1), else to sandbox-results/ as
 * `showcase-<name>`, so every run takes it and anyone can look at it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { sleep } from '../src/core/sleep';
import { REPO_ROOT } from './vscode';

export const SHOWCASE_DIR = path.join(REPO_ROOT, 'media', 'screenshots');
const RESULTS_DIR = path.join(REPO_ROOT, 'sandbox-results');
/** The window a showcase shot is taken in (CSS px) and its pixel density. */
const WINDOW = { width: 1024, height: 640 };
const DENSITY = 2;
/** The workbench's layout (and a notebook's webviews) settling after the window changes size, and
 * the scroll bars a hover showed fading out. */
const SETTLE_MS = 1_500;

/** Whether this run refreshes the screenshots committed under media/screenshots/. */
export function refreshingScreenshots(): boolean {
  return process.env.SANDBOX_REFRESH_SCREENSHOTS === '1';
}

/** Where a showcase shot named `name` is written in this run. */
export function showcasePath(name: string): string {
  return refreshingScreenshots() ? path.join(SHOWCASE_DIR, name) : path.join(RESULTS_DIR, `showcase-${name}`);
}

/** Saves the workbench as it is now, laid out in the showcase window, then gives the page its size back. */
export async function showcase(page: Page, name: string, note: (m: string) => void): Promise<void> {
  const file = showcasePath(name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const before = page.viewportSize();
  if (!before) throw new Error('the workbench page has no fixed viewport to give back after a showcase shot');
  const density = await page.evaluate<number>('window.devicePixelRatio');
  await page.setViewportSize(WINDOW);
  // Off the editors (a hovered editor shows its scroll bar), onto the empty title bar right of the command center.
  await page.mouse.move(WINDOW.width * 0.8, 16);
  // Playwright sets no density per page, and its screenshot keeps CSS pixels: Chromium's own
  // emulation and capture do both (the emulation lasts until the viewport is set again).
  const cdp = await page.context().newCDPSession(page);
  try {
    await cdp.send('Emulation.setDeviceMetricsOverride', { ...WINDOW, deviceScaleFactor: DENSITY, mobile: false });
    await sleep(SETTLE_MS);
    const { data } = await cdp.send('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
  } finally {
    await page.setViewportSize(before);
    await cdp.detach();
    await sleep(SETTLE_MS);
  }
  const after = await page.evaluate<number>('window.devicePixelRatio');
  if (after !== density) throw new Error(`the workbench's pixel density stayed ${after} after a showcase shot (was ${density})`);
  note(`showcase screenshot ${path.relative(REPO_ROOT, file)} (${Math.round(fs.statSync(file).size / 1024)} KB)`);
}
