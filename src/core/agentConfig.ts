/**
 * MCP client configs for the bridge, as the agents read them (Claude Code's `.mcp.json`,
 * Cursor's `.cursor/mcp.json`, Codex's `~/.codex/config.toml`). Pure: the command that writes
 * them lives on the VS Code side. Merging touches one key and keeps everything else as it was.
 */

export const MCP_SERVER_NAME = 'agent-bridge';
export const MCP_URL_PATH = '/mcp/server';

export type AgentClient = 'claude' | 'cursor' | 'codex';

/**
 * How the config names the server and its token: `literal` writes this window's URL and token
 * (valid until the window reloads: the token is per window); `terminal` refers to the variables
 * the extension puts in VS Code's terminals, so it stays valid across reloads for agents started
 * there.
 */
export type Credentials =
  { mode: 'literal'; url: string; token: string | null } | { mode: 'terminal'; url: string; tokenRequired: boolean };

export const URL_VAR = 'AGENT_BRIDGE_URL';
export const TOKEN_VAR = 'MARIMO_TOKEN';

/** The server entry of a JSON config (Claude Code and Cursor share the `mcpServers` shape). */
export function jsonServerEntry(client: 'claude' | 'cursor', credentials: Credentials): Record<string, unknown> {
  // Claude Code expands ${VAR} in .mcp.json; Cursor's own process never has the terminal's variables.
  if (credentials.mode === 'terminal' && client === 'cursor')
    throw new Error('Cursor reads no terminal variables: use literal credentials');
  const terminal = credentials.mode === 'terminal';
  const url = terminal ? `\${${URL_VAR}}${MCP_URL_PATH}` : `${credentials.url}${MCP_URL_PATH}`;
  const token = terminal ? (credentials.tokenRequired ? `\${${TOKEN_VAR}}` : null) : credentials.token;
  const headers = token ? { headers: { Authorization: `Bearer ${token}` } } : {};
  return client === 'claude' ? { type: 'http', url, ...headers } : { url, ...headers };
}

type JsonObject = Record<string, unknown>;
const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `existing` (a config file's text, or undefined when there is none) with `mcpServers[name]` set
 * to `entry`; every other key, server and their order are kept. Refuses (throws) rather than
 * overwrite a file it cannot read as a JSON object.
 */
export function mergeMcpJson(existing: string | undefined, name: string, entry: JsonObject, file = 'the config file'): string {
  let config: JsonObject = {};
  if (existing !== undefined && existing.trim() !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(existing);
    } catch (error) {
      throw new Error(
        `${file} is not valid JSON (${error instanceof Error ? error.message : String(error)}); fix it, or add the "${name}" entry by hand`,
        { cause: error },
      );
    }
    if (!isObject(parsed)) throw new Error(`${file} does not hold a JSON object; add the "${name}" entry by hand`);
    config = parsed;
  }
  const servers = config['mcpServers'] ?? {};
  if (!isObject(servers)) throw new Error(`"mcpServers" in ${file} is not an object; add the "${name}" entry by hand`);
  const merged = { ...config, mcpServers: { ...servers, [name]: entry } };
  return `${JSON.stringify(merged, null, 2)}\n`;
}

/** TOML basic string: JSON's escapes are TOML's for everything a URL or token holds. */
const tomlString = (s: string) => JSON.stringify(s);

/** The table to add to `~/.codex/config.toml` (printed for the person to paste, not merged blindly). */
export function codexToml(credentials: Credentials, name = MCP_SERVER_NAME): string {
  const lines = [`[mcp_servers.${name}]`, `url = ${tomlString(`${credentials.url}${MCP_URL_PATH}`)}`];
  if (credentials.mode === 'terminal') {
    if (credentials.tokenRequired) lines.push(`bearer_token_env_var = ${tomlString(TOKEN_VAR)}`);
  } else if (credentials.token) {
    lines.push(`http_headers = { Authorization = ${tomlString(`Bearer ${credentials.token}`)} }`);
  }
  return `${lines.join('\n')}\n`;
}

/** Where Claude Code and Codex look for personal skills; ours goes in its own folder. */
export function skillDirs(home: string, join: (...parts: string[]) => string): Record<'claude' | 'codex', string> {
  return { claude: join(home, '.claude', 'skills', MCP_SERVER_NAME), codex: join(home, '.codex', 'skills', MCP_SERVER_NAME) };
}
