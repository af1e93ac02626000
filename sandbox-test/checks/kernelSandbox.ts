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
import { checkBubblewrap } from '../../src/kernels/builtin/kernelSandbox';
import { eq, includes, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { screenshot } from './access';
import { setBoolean } from '../settingsEditor';
import { type CheckContext, checkRun, context, skipped } from './context';
import { sleep } from '../../src/core/sleep';

const NAMES = {
  on: 'kernel sandbox: turned on in the Settings editor, the status bar says so and the kernel restarts under bubblewrap',
  network: "kernel sandbox: a socket connect fails, even to the bridge's own port on 127.0.0.1",
  home: "kernel sandbox: a write to the home folder fails and the home folder shows nothing of the person's",
  workspace: 'kernel sandbox: the workspace reads and writes (the host sees the file); pandas imports',
  interrupt: 'kernel sandbox: an interrupt stops a loop and the kernel lives on',
  off: 'kernel sandbox: turned off again, the kernel runs with the network back',
} as const;

const SETTING = 'agentBridge.kernel.sandbox';

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
    const shot = () => screenshot(ctx.sandbox.page, 'kernel-sandbox-setting.png', note);
    await setBoolean(ctx.sandbox.page, ctx.sandbox.dirs.userData, SETTING, true, shot);
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
    await setBoolean(ctx.sandbox.page, ctx.sandbox.dirs.userData, SETTING, false);
    await ctx.sandbox.page
      .locator('.statusbar-item', { hasText: 'Kernel sandbox' })
      .first()
      .waitFor({ state: 'hidden', timeout: 20_000 });
    await restartUntil('unsandboxed', signal, note);
    const code = `import socket\ntry:\n    socket.create_connection(("127.0.0.1", ${ctx.advert.port}), timeout=3).close()\n    print("connected")\nexcept OSError as e:\n    print("refused:", e)`;
    includes((await run(code, signal)).stdout, 'connected', 'the connect after the sandbox is off');
  }).timeout(90_000);
}
