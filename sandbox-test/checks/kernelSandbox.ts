/**
 * The builtin kernel under bubblewrap (agentBridge.kernel.sandbox), turned on and off as the
 * person would, in the Settings editor (an agent cannot: the setting is machine-scoped, no workspace file sets it). On
 * other.ipynb's kernel: the network is gone (not even the bridge's own loopback port answers),
 * the home folder is hidden and unwritable, the workspace reads and writes, pandas imports, and an
 * interrupt still stops a loop without killing the kernel. Where bubblewrap cannot run on this
 * machine, every check is reported pending, by name, with bubblewrap's own words.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import { checkBubblewrap } from '../../src/kernels/builtin/kernelSandbox';
import { eq, includes, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { screenshot } from './access';
import { type CheckContext, checkRun, context, readJson, skipped } from './context';

const NAMES = {
  on: 'kernel sandbox: turned on in the Settings editor, the status bar says so and the kernel restarts under bubblewrap',
  network: "kernel sandbox: a socket connect fails, even to the bridge's own port on 127.0.0.1",
  home: "kernel sandbox: a write to the home folder fails and the home folder shows nothing of the person's",
  workspace: 'kernel sandbox: the workspace reads and writes (the host sees the file); pandas imports',
  interrupt: 'kernel sandbox: an interrupt stops a loop and the kernel lives on',
  off: 'kernel sandbox: turned off again, the kernel runs with the network back',
} as const;

const SETTING = 'agentBridge.kernel.sandbox';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The person sets the setting's checkbox in the Settings editor to `on`. */
async function setSetting(page: Page, userData: string, on: boolean): Promise<void> {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.type('Preferences: Open User Settings');
  // Not the "(JSON)" one; a recently used command's row also says so, hence the exact label.
  const command = page.getByText('Preferences: Open User Settings', { exact: true });
  await page.locator('.quick-input-widget .monaco-list-row').filter({ has: command }).first().click({ timeout: 20_000 });
  // The search box is a small editor: it has the focus once the Settings editor opens.
  const search = page.locator('.settings-editor .suggest-input-container').first();
  await search.waitFor({ state: 'visible', timeout: 20_000 });
  await search.click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.type(SETTING);
  // A machine-scoped setting: in a remote window (code-server's is one) it lives in the Remote tab.
  const tabs = page.locator('.settings-editor .settings-tabs-widget');
  await tabs
    .locator('.action-label', { hasText: /^Remote/ })
    .first()
    .click();
  await tabs
    .locator('.action-label.checked', { hasText: /^Remote/ })
    .first()
    .waitFor({ timeout: 10_000 });
  // Only once the search has filtered the list down to our setting (its description says so).
  const item = page.locator('.settings-editor .setting-item-bool', { hasText: 'Run the builtin kernel under bubblewrap' });
  const checkbox = item.first().locator('.setting-value-checkbox');
  await checkbox.waitFor({ state: 'visible', timeout: 20_000 });
  const want = String(on);
  if ((await checkbox.getAttribute('aria-checked')) !== want) await checkbox.click();
  await item.first().locator(`.setting-value-checkbox[aria-checked="${want}"]`).waitFor({ timeout: 10_000 });
  // The editor writes the Remote tab's settings.json a moment later: closing it first can lose the change.
  const file = path.join(userData, 'Machine', 'settings.json');
  const saved = () => (fs.existsSync(file) ? (readJson<Record<string, unknown>>(file)[SETTING] ?? false) : false);
  for (const t0 = Date.now(); saved() !== on; await sleep(100))
    if (Date.now() > t0 + 10_000) throw new Error(`${file} never said ${SETTING}: ${on}`);
}

/** Closes the Settings editor (a modal here) with Escape, as the person would. */
async function closeSettings(page: Page): Promise<void> {
  await page.keyboard.press('Escape');
  await page
    .locator('.settings-editor')
    .first()
    .waitFor({ state: 'hidden', timeout: 10_000 })
    .catch(() => undefined);
}

/** The `kernel sandbox` suite's checks. */
export function kernelSandboxChecks(): void {
  const check = checkBubblewrap();
  if (!check.ok) return skipped(Object.values(NAMES), check.reason);
  let ctx: CheckContext;
  let client: BridgeClient;
  let sid: string;
  before(() => {
    ctx = context();
    ({ client } = ctx);
    sid = ctx.other.session.id;
  });
  const run = async (code: string, signal: AbortSignal, timeoutMs = 30_000) => {
    const r = await client.run(sid, code, { signal, timeoutMs });
    eq(r.status, 200, `execute status (${show(r.raw, 300)})`);
    return r;
  };
  /** Restarts the kernel until `probe` prints `want` (VS Code hands the changed setting over a moment later). */
  const restartUntil = async (want: string, signal: AbortSignal, note: (m: string) => void) => {
    const probe = 'import os\nprint(os.environ.get("TMPDIR"))';
    let seen = '';
    for (const t0 = Date.now(); Date.now() < t0 + 30_000; await sleep(500)) {
      const restart = await client.post('/notebooks/restart', { notebook: sid }, { signal, timeoutMs: 30_000 });
      eq(restart.status, 200, `POST /notebooks/restart (${show(restart.text, 300)})`);
      seen = (await run(probe, signal)).stdout.trim();
      note(`after ${Date.now() - t0} ms the kernel's TMPDIR is ${seen}`);
      if ((seen === '/tmp') === (want === 'sandboxed')) return;
    }
    ok(false, `the kernel never ran ${want} (its TMPDIR: ${seen})`);
  };

  it(NAMES.on, async () => {
    const { signal, note } = checkRun();
    await setSetting(ctx.sandbox.page, ctx.sandbox.dirs.userData, true);
    await screenshot(ctx.sandbox.page, 'kernel-sandbox-setting.png', note);
    await closeSettings(ctx.sandbox.page);
    const item = ctx.sandbox.page.locator('.statusbar-item', { hasText: 'Kernel sandbox' }).first();
    await item.waitFor({ state: 'visible', timeout: 20_000 });
    await screenshot(ctx.sandbox.page, 'kernel-sandbox-on.png', note);
    await restartUntil('sandboxed', signal, note);
  }).timeout(90_000);

  it(NAMES.network, async () => {
    const { signal } = checkRun();
    const code = `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${ctx.advert.port}), timeout=3)\n    print("connected")\nexcept OSError as e:\n    print("refused:", e)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'refused:', 'the connect');
  });

  it(NAMES.home, async () => {
    const { signal } = checkRun();
    const code = `import os\nhome = os.path.expanduser("~")\nprint(home, sorted(os.listdir(home)))\ntry:\n    open(os.path.join(home, "agent-was-here"), "w").write("x")\n    print("written")\nexcept OSError as e:\n    print("write failed:", e.strerror)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'write failed:', 'the write to home');
    includes(out, `${ctx.sandbox.dirs.home} []`, 'the home listing');
    ok(!fs.existsSync(path.join(ctx.sandbox.dirs.home, 'agent-was-here')), 'the file reached the real home folder');
  });

  it(NAMES.workspace, async () => {
    const { signal } = checkRun();
    const file = path.join(ctx.workspace, 'sandbox-probe.txt');
    const code = `import pandas\np = ${JSON.stringify(file)}\nopen(p, "w").write("from the sandbox")\nprint(open(p).read(), pandas.__name__)`;
    const out = (await run(code, signal)).stdout;
    includes(out, 'from the sandbox pandas', 'the kernel reads back its file and imports pandas');
    eq(fs.readFileSync(file, 'utf8'), 'from the sandbox', 'the file as the host sees it');
    fs.rmSync(file);
  });

  it(NAMES.interrupt, async () => {
    const { signal } = checkRun();
    const loop = client.run(sid, 'import time\nwhile True:\n    time.sleep(0.05)', { signal, timeoutMs: 30_000 });
    await sleep(1500);
    const r = await client.post('/notebooks/interrupt', { notebook: sid }, { signal, timeoutMs: 10_000 });
    eq(r.status, 200, `POST /notebooks/interrupt (${show(r.text, 300)})`);
    includes((await loop).stderr, 'KeyboardInterrupt', 'the loop ends with');
    includes((await run('print("still here")', signal)).stdout, 'still here', 'the next run');
  });

  it(NAMES.off, async () => {
    const { signal, note } = checkRun();
    await setSetting(ctx.sandbox.page, ctx.sandbox.dirs.userData, false);
    await screenshot(ctx.sandbox.page, 'kernel-sandbox-setting-off.png', note);
    await closeSettings(ctx.sandbox.page);
    await ctx.sandbox.page
      .locator('.statusbar-item', { hasText: 'Kernel sandbox' })
      .first()
      .waitFor({ state: 'hidden', timeout: 20_000 });
    await restartUntil('unsandboxed', signal, note);
    const code = `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${ctx.advert.port}), timeout=3).close()\n    print("connected")\nexcept OSError as e:\n    print("refused:", e)`;
    includes((await run(code, signal)).stdout, 'connected', 'the connect after the sandbox is off');
  }).timeout(90_000);
}
