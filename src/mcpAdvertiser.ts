import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vscode from 'vscode';
import type { ConnectionInfo } from './bridge';
import {
  codexToml,
  jsonServerEntry,
  mergeMcpJson,
  MCP_SERVER_NAME,
  MCP_URL_PATH,
  TOKEN_VAR,
  type AgentClient,
  type Credentials,
} from './core/agents/agentConfig';
import type { Log } from './core/log';
import { writeFileAtomic } from './fsAtomic';
import { errorMessage } from './core/errorMessage';

const PROVIDER_ID = 'agentBridge.mcp';

/**
 * Offers the bridge to VS Code's own agents as an MCP server (URL + token header). VS Code asks
 * again when told the definition changed, which happens when the server restarts on a new port.
 */
export class McpAdvertiser implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  private readonly registration: vscode.Disposable | undefined;
  private advertised = '';

  constructor(
    private readonly connection: () => ConnectionInfo | undefined,
    private readonly version: string,
    log: Log,
  ) {
    try {
      this.registration = vscode.lm.registerMcpServerDefinitionProvider(PROVIDER_ID, {
        onDidChangeMcpServerDefinitions: this.changed.event,
        // VS Code caches what this returns in its state, so it carries no token.
        provideMcpServerDefinitions: () => {
          const definition = this.definition(false);
          return definition ? [definition] : [];
        },
        // Asked each time VS Code starts the server: the current address, and the token, which
        // lives only in this window's memory.
        resolveMcpServerDefinition: () => this.definition(true),
      });
    } catch (error) {
      // Editors without the MCP API (or with AI features off) still get the HTTP bridge.
      log.warn(`MCP server definitions are not available here: ${errorMessage(error)}`);
    }
  }

  /** Tells VS Code when the server's address or token changed since it last asked. */
  update(): void {
    const c = this.connection();
    const key = c ? `${c.url} ${c.token ?? ''}` : '';
    if (key === this.advertised) return;
    this.advertised = key;
    this.changed.fire();
  }

  private definition(withToken: boolean): vscode.McpHttpServerDefinition | undefined {
    const c = this.connection();
    if (!c) return undefined;
    const headers: Record<string, string> = withToken && c.token ? { Authorization: `Bearer ${c.token}` } : {};
    return new vscode.McpHttpServerDefinition('Agent Bridge', vscode.Uri.parse(`${c.url}${MCP_URL_PATH}`), headers, this.version);
  }

  dispose(): void {
    this.registration?.dispose();
    this.changed.dispose();
  }
}

interface TargetItem extends vscode.QuickPickItem {
  client: AgentClient;
}

const TARGETS: TargetItem[] = [
  { client: 'claude', label: 'Claude Code', description: '.mcp.json in the workspace folder' },
  { client: 'cursor', label: 'Cursor', description: '.cursor/mcp.json in the workspace folder' },
  { client: 'codex', label: 'Codex', description: 'print the table for ~/.codex/config.toml' },
];

/**
 * `agentBridge.writeMcpConfig`: adds (or replaces) the bridge's own entry in an agent's MCP
 * config, leaving every other entry as it was; Codex's TOML is printed for the person to paste.
 */
export async function writeMcpConfig(connection: ConnectionInfo | undefined, configuredPort: number): Promise<void> {
  if (!connection) {
    void vscode.window.showWarningMessage('Agent Bridge is not running: run "Agent Bridge: Restart Server" first.');
    return;
  }
  const target = await vscode.window.showQuickPick(TARGETS, { placeHolder: 'Write the Agent Bridge MCP config for…' });
  if (!target) return;
  const credentials = await pickCredentials(connection, target.client);
  if (!credentials) return;
  const notes: string[] = [];
  if (credentials.mode === 'literal' && credentials.token)
    notes.push("It holds this window's token: keep it out of version control, and run this again after a reload.");
  if (configuredPort === 0 && !(credentials.mode === 'terminal' && target.client === 'claude')) {
    notes.push('The port changes at every start: set "agentBridge.port" to keep this address valid.');
  }

  if (target.client === 'codex') {
    const text = `# Add to ~/.codex/config.toml (replace any earlier [mcp_servers.${MCP_SERVER_NAME}] table)\n${codexToml(credentials)}`;
    await vscode.env.clipboard.writeText(text);
    await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ content: text, language: 'toml' }), {
      preview: true,
    });
    void vscode.window.showInformationMessage(['Codex config copied to the clipboard.', ...notes].join(' '));
    return;
  }

  const folder = await workspaceFolder();
  if (!folder) return;
  const file = target.client === 'claude' ? join(folder.uri.fsPath, '.mcp.json') : join(folder.uri.fsPath, '.cursor', 'mcp.json');
  try {
    const merged = mergeMcpJson(readIfExists(file), MCP_SERVER_NAME, jsonServerEntry(target.client, credentials), file);
    writeFileAtomic(file, merged); // mode 0600: it may hold the token
  } catch (error) {
    void vscode.window.showErrorMessage(`Could not write ${file}: ${errorMessage(error)}`);
    return;
  }
  const choice = await vscode.window.showInformationMessage(
    [`Wrote "${MCP_SERVER_NAME}" to ${file}.`, ...notes].join(' '),
    'Open',
  );
  if (choice) await vscode.window.showTextDocument(vscode.Uri.file(file));
}

interface CredentialItem extends vscode.QuickPickItem {
  mode: Credentials['mode'];
}

async function pickCredentials(connection: ConnectionInfo, client: AgentClient): Promise<Credentials | undefined> {
  const literal: Credentials = { mode: 'literal', url: connection.url, token: connection.token };
  // Cursor's MCP client runs in its own process, which never sees the terminal's variables.
  if (client === 'cursor') return literal;
  const items: CredentialItem[] = [
    {
      mode: 'terminal',
      label: 'From the terminal environment',
      description: `$${TOKEN_VAR}: for agents started in VS Code's terminal; survives reloads`,
    },
    {
      mode: 'literal',
      label: "This window's address and token",
      description: 'works from any terminal, until this window reloads',
    },
  ];
  if (!connection.token) return literal;
  const pick = await vscode.window.showQuickPick(items, { placeHolder: 'How should the config find the token?' });
  if (!pick) return undefined;
  return pick.mode === 'literal' ? literal : { mode: 'terminal', url: connection.url, tokenRequired: true };
}

async function workspaceFolder(): Promise<vscode.WorkspaceFolder | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  if (folders.length === 0) {
    void vscode.window.showWarningMessage('Open a folder first: the config goes in the workspace folder.');
    return undefined;
  }
  return folders.length === 1
    ? folders[0]
    : vscode.window.showWorkspaceFolderPick({ placeHolder: 'Write the config in which folder?' });
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
