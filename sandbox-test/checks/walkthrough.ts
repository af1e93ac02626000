/**
 * The walkthrough a person meets after installing: opened from the command palette as they
 * would ("Welcome: Open Walkthrough..."), its steps read from the page, a screenshot saved to
 * sandbox-results/ (look at it).
 */
import { fail, includes } from '../assert';
import { screenshot } from '../screenshots';
import { checkRun, context } from './context';

const TITLE = 'Connect an agent to your notebooks';
const STEPS = [
  'The bridge is running',
  'Open a notebook',
  'Start an agent in the terminal',
  'Connect over MCP',
  'Choose what agents may do',
];

/** The `walkthrough` suite's check. */
export function walkthroughChecks(): void {
  it('walkthrough: "Connect an agent to your notebooks" opens from the palette with its five steps, terminal, MCP and access among them', async () => {
    const { note } = checkRun();
    const page = context().sandbox.page;
    await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await page.keyboard.type('Welcome: Open Walkthrough');
    await page
      .locator('.quick-input-widget .monaco-list-row', { hasText: 'Open Walkthrough' })
      .first()
      .click({ timeout: 20_000 });
    await input.waitFor({ state: 'visible', timeout: 10_000 });
    await page.keyboard.type('Connect an agent');
    await page.locator('.quick-input-widget .monaco-list-row', { hasText: TITLE }).first().click({ timeout: 20_000 });
    const container = page.locator('.gettingStartedContainer, .getting-started-container').first();
    await container
      .locator('text=' + STEPS[0])
      .first()
      .waitFor({ state: 'visible', timeout: 20_000 })
      .catch(() => fail(`the walkthrough "${TITLE}" did not open`));
    const text = await container.innerText();
    includes(text, TITLE, 'the walkthrough page');
    for (const step of STEPS) includes(text, step, 'a step of the walkthrough');
    await page.waitForTimeout(800); // the step's markdown renders in a webview
    await screenshot(page, 'walkthrough.png', note);
    // Leave the workbench as the other checks expect it: the notebooks in front. (Ctrl+W would
    // be the browser's, closing the page.)
    const tab = page.getByRole('tab', { name: /Welcome/ }).first();
    await tab.hover();
    await tab
      .getByRole('button', { name: /^Close/ })
      .first()
      .click({ timeout: 5_000 });
    await tab.waitFor({ state: 'detached', timeout: 5_000 });
  }).timeout(60_000);
}
