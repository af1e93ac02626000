import * as vscode from 'vscode';
import type { Bridge } from './bridge';
import type { Settings } from './config';
import type { BuiltinKernels } from './kernels/builtin/controller';
import { writeMcpConfig } from './mcpAdvertiser';
import { installSkill } from './skill';

export interface CommandDeps {
  bridge: Bridge;
  builtin: BuiltinKernels;
  log: vscode.LogOutputChannel;
  restartServer: () => Promise<void>;
  /** The agent skill shipped in the extension (skills/agent-bridge). */
  skillDir: string;
  settings: Settings;
}

/** Every command of the extension, in one table (ids match package.json). */
export function commandTable(deps: CommandDeps): Record<string, () => unknown> {
  return {
    'agentBridge.copyConnectionInfo': async () => {
      const connection = deps.bridge.connection;
      if (!connection) {
        void vscode.window.showWarningMessage('Agent Bridge is not running: run "Agent Bridge: Restart Server".');
        return;
      }
      const notebook = vscode.window.activeNotebookEditor?.notebook;
      const file = notebook?.uri.scheme === 'file' ? ` --file '${notebook.uri.fsPath}'` : '';
      const env = connection.token ? `MARIMO_TOKEN=${connection.token} ` : '';
      const text = [
        `Agent Bridge URL: ${connection.url}`,
        connection.token ? `MARIMO_TOKEN=${connection.token}` : 'Token: off (agentBridge.requireToken is false)',
        `${env}execute-code.sh --url ${connection.url}${file} -c 'print(1)'`,
      ].join('\n');
      await vscode.env.clipboard.writeText(text);
      void vscode.window.showInformationMessage(
        `Agent Bridge connection info for ${connection.url} copied (it contains the token).`,
      );
    },
    'agentBridge.restartServer': () => deps.restartServer(),
    'agentBridge.showLog': () => deps.log.show(true),
    'agentBridge.writeMcpConfig': () => writeMcpConfig(deps.bridge.connection, deps.settings.current.port),
    'agentBridge.installSkill': () => installSkill(deps.skillDir),
    'agentBridge.restartKernel': async () => {
      const notebook = vscode.window.activeNotebookEditor?.notebook;
      if (!notebook) {
        void vscode.window.showWarningMessage('Open a notebook that uses the Agent Bridge Python kernel first.');
        return;
      }
      if (!(await deps.builtin.restart(notebook)))
        void vscode.window.showWarningMessage('This notebook does not use the Agent Bridge Python kernel.');
    },
  };
}
