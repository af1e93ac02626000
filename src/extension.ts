import { join } from 'node:path';
import * as vscode from 'vscode';
import { Bridge } from './bridge';
import type { Composition } from './composition';
import { Settings } from './config';
import { Discovery, marimoRegistryDir, marimoRegistryFileName, removeStaleEntries } from './discovery';
import { errorMessage } from './core/errorMessage';

/** When VS Code loaded this bundle: from then until it calls activate(), it makes our extension context. */
const loadedAt = performance.now();
/**
 * Stops the server and withdraws the discovery files. VS Code calls deactivate() without the
 * context and awaits what it returns (the subscriptions' dispose() cannot be awaited), so
 * activation leaves the stop here.
 */
let stopBridge: (() => Promise<void>) | undefined;

/**
 * Activation: the socket first, then the rest. This bundle (dist/extension.js) holds only the
 * settings, the server's lifecycle and the discovery files; kernels, notebooks, access, Express,
 * zod and the route table are dist/composition.js (src/composition.ts), loaded once the server
 * listens. A request that comes before waits for them (src/server/listen.ts, deferredApp).
 */
export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const began = performance.now();
  const push = (...items: vscode.Disposable[]) => context.subscriptions.push(...items);
  const log = vscode.window.createOutputChannel('Agent Bridge', { log: true });
  const settings = new Settings();
  push(log, settings);
  try {
    const version = String(context.extension.packageJSON.version);
    const advertDir = join(context.globalStorageUri.fsPath, 'bridges');
    const ownFiles = [join(advertDir, marimoRegistryFileName('127.0.0.1', process.pid))];
    const extraFile = process.env['AGENT_BRIDGE_DISCOVERY_FILE'];
    if (extraFile) ownFiles.push(extraFile);
    const discovery = new Discovery(ownFiles, marimoRegistryDir());
    let composition: Promise<Composition> | undefined;
    const composed = (): Promise<Composition> =>
      (composition ??= import('./composition').then((m) => m.compose({ context, log, settings, bridge, version })));
    const bridge: Bridge = new Bridge({
      version,
      log,
      discovery,
      settings: () => settings.current,
      app: async (server) => (await composed()).app(server),
    });
    stopBridge = () => bridge.stop();
    push({ dispose: () => discovery.dispose() });
    try {
      await bridge.start();
      const ms = (from: number) => (performance.now() - from).toFixed(1);
      log.info(`activate() → listening: ${ms(began)} ms (bundle loaded → listening: ${ms(loadedAt)} ms)`);
    } finally {
      // Also when the port was taken: the commands (Restart Server) and the status bar saying so.
      await (await composed()).refresh();
    }
    // After listening: what windows that crashed left behind is no reason to make this one wait.
    for (const file of removeStaleEntries(advertDir, marimoRegistryDir())) log.info(`removed the stale discovery file ${file}`);
  } catch (error) {
    // VS Code shows nothing when activation fails; say it where the person looks.
    const message = errorMessage(error);
    log.error(`activation failed: ${error instanceof Error ? error.stack : message}`);
    void vscode.window.showErrorMessage(`Agent Bridge could not start: ${message}`, 'Show Log').then((c) => c && log.show());
  }
}

export async function deactivate(): Promise<void> {
  // The rest is in context.subscriptions, which VS Code disposes after this settles.
  await stopBridge?.();
  stopBridge = undefined;
}
