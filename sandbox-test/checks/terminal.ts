/**
 * An agent started in the editor's integrated terminal finds the bridge with no flags of its own:
 * the terminal's environment carries AGENT_BRIDGE_URL and MARIMO_TOKEN. In the sandbox's browser
 * the harness opens a terminal and types the real execute-code.sh with neither a URL nor a token
 * of its own (the script insists on `--url`, so it is given the terminal's `$AGENT_BRIDGE_URL`).
 * Then "Agent Bridge: Restart Server" moves the bridge to a new port, and a new terminal gets the
 * new values. Output goes to a file in the workspace, read back by the harness; screenshots show
 * the terminal.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { eq, fail } from '../assert';
import { BridgeClient } from '../http';
import { screenshot } from '../screenshots';
import { checkRun, context, findBridge, setContext, skipped, suiteState } from './context';
import { scriptsDir } from './scripts';
import { sleep } from '../../src/core/sleep';

const NAMES = {
  first: "terminal: execute-code.sh typed in the editor's terminal, with no URL or token of its own, prints 42",
  restarted: 'terminal: after "Agent Bridge: Restart Server" moves the bridge, a new terminal gets the new URL and reaches it',
} as const;

async function palette(page: Page, command: string): Promise<void> {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.type(command);
  const row = page.getByText(command, { exact: true });
  await page.locator('.quick-input-widget .monaco-list-row').filter({ has: row }).first().click({ timeout: 20_000 });
}

/** The `terminal` suite's checks (pending by name without marimo-pair's scripts). */
export function terminalChecks(): void {
  const scripts = scriptsDir();
  const script = scripts && path.join(scripts, 'execute-code.sh');
  if (!script || !fs.existsSync(script))
    return skipped(Object.values(NAMES), scripts ? `no execute-code.sh in ${scripts}` : 'MARIMO_PAIR_SCRIPTS is not set');
  const ctx = suiteState();

  /** Opens a new terminal and types the script into it; what the terminal printed, read back from a file. */
  const runInTerminal = async (name: string, note: (m: string) => void): Promise<{ out: string; url: string }> => {
    const page = ctx.sandbox.page;
    const out = path.join(ctx.workspace, `${name}.out`);
    await palette(page, 'Terminal: Create New Terminal');
    const terminal = page.locator('.terminal-wrapper.active .xterm').first();
    await terminal.waitFor({ state: 'visible', timeout: 20_000 });
    await terminal.click();
    await sleep(1000); // the shell's prompt
    const file = ctx.analysis.path;
    await page.keyboard.type(
      `echo "$AGENT_BRIDGE_URL" > ${name}.url; bash '${script}' --url "$AGENT_BRIDGE_URL" --file '${file}' -c 'print(6*7)' 2>&1 | tee ${name}.out\n`,
    );
    for (const t0 = Date.now(); !fs.existsSync(out) || !fs.readFileSync(out, 'utf8').includes('\n'); await sleep(200))
      if (Date.now() > t0 + 30_000) fail(`the terminal wrote nothing to ${out} within 30 s`);
    await sleep(300);
    await screenshot(page, `terminal-${name}.png`, note);
    const result = {
      out: fs.readFileSync(out, 'utf8'),
      url: fs.readFileSync(path.join(ctx.workspace, `${name}.url`), 'utf8').trim(),
    };
    fs.rmSync(out);
    fs.rmSync(path.join(ctx.workspace, `${name}.url`));
    return result;
  };

  it(NAMES.first, async () => {
    const { note } = checkRun();
    const { out, url } = await runInTerminal('first', note);
    eq(url, ctx.advert.url, "the terminal's AGENT_BRIDGE_URL");
    eq(out.trim(), '42', 'what the script printed');
  }).timeout(90_000);

  it(NAMES.restarted, async () => {
    const { note } = checkRun();
    const before = ctx.advert;
    await palette(ctx.sandbox.page, 'Agent Bridge: Restart Server');
    const advert = await findBridge(ctx.sandbox, ctx.discoveryFile, (a) => a.port !== before.port);
    note(`the bridge moved from ${before.url} to ${advert.url}`);
    // The checks after this one talk to the bridge where it is now.
    const registryFile = path.join(ctx.registryDir, `127.0.0.1_${advert.port}.json`);
    setContext({ ...context(), advert, client: new BridgeClient(advert.url, advert.token), registryFile });
    const { out, url } = await runInTerminal('restarted', note);
    eq(url, advert.url, "the new terminal's AGENT_BRIDGE_URL");
    eq(out.trim(), '42', 'what the script printed');
  }).timeout(120_000);
}
