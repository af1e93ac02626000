import { applyEdits, findNodeAtLocation, modify, parseTree, printParseErrorCode, type ParseError } from 'jsonc-parser';

/**
 * MCP client configs for the bridge, as the agents read them (Claude Code's `.mcp.json`,
 * Cursor's `.cursor/mcp.json`, Codex's `~/.codex/config.toml`). Pure: the command that writes
 * them lives on the VS Code side. Merging touches one key and keeps everything else as it was.
 */

export const MCP_SERVER_NAME = 'agent-bridge';
export const MCP_URL_PATH = '/mcp/server';

export type AgentClient = 'claude' | 'cursor' | 'codex';

/** The agent-name header as the configurations spell it, and the name each agent is given. */
const CLIENT_HEADER_NAME = 'X-Agent-Bridge-Client';
const AGENT_NAMES: Record<AgentClient, string> = { claude: 'claude-code', cursor: 'cursor', codex: 'codex' };

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
  // The agent's name travels as a claim (core/agents/clients.ts): shown to the person, never a key.
  const headers = {
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), [CLIENT_HEADER_NAME]: AGENT_NAMES[client] },
  };
  return client === 'claude' ? { type: 'http', url, ...headers } : { url, ...headers };
}

type JsonObject = Record<string, unknown>;

/**
 * `existing` (a config file's text, or undefined when there is none) with `mcpServers[name]` set
 * to `entry`, edited in place (jsonc-parser's `modify`): every other key, server, comment and the
 * file's own formatting stay as they were. Refuses (throws) rather than overwrite a file it
 * cannot read as a JSON object.
 */
export function mergeMcpJson(existing: string | undefined, name: string, entry: JsonObject, file = 'the config file'): string {
  const text = existing?.trim() ? existing : '{}\n';
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { allowTrailingComma: true });
  if (errors.length || !tree) {
    const why = errors.map((e) => `${printParseErrorCode(e.error)} at offset ${e.offset}`).join(', ') || 'empty';
    throw new Error(`${file} is not valid JSON (${why}); fix it, or add the "${name}" entry by hand`);
  }
  if (tree.type !== 'object') throw new Error(`${file} does not hold a JSON object; add the "${name}" entry by hand`);
  const servers = findNodeAtLocation(tree, ['mcpServers']);
  if (servers && servers.type !== 'object')
    throw new Error(`"mcpServers" in ${file} is not an object; add the "${name}" entry by hand`);
  const indent = /\n([ \t]+)"/.exec(text)?.[1] ?? '  ';
  const edits = modify(text, ['mcpServers', name], entry, {
    formattingOptions: {
      insertSpaces: !indent.startsWith('\t'),
      tabSize: indent.startsWith('\t') ? 1 : indent.length,
      eol: '\n',
    },
  });
  const merged = applyEdits(text, edits);
  return merged.endsWith('\n') ? merged : `${merged}\n`;
}

/** TOML basic string: JSON's escapes are TOML's for everything a URL or token holds. */
const tomlString = (s: string) => JSON.stringify(s);

/** The table to add to `~/.codex/config.toml` (printed for the person to paste, not merged blindly). */
export function codexToml(credentials: Credentials, name = MCP_SERVER_NAME): string {
  const lines = [`[mcp_servers.${name}]`, `url = ${tomlString(`${credentials.url}${MCP_URL_PATH}`)}`];
  const agent = `${tomlString(CLIENT_HEADER_NAME)} = ${tomlString(AGENT_NAMES.codex)}`;
  if (credentials.mode === 'terminal') {
    if (credentials.tokenRequired) lines.push(`bearer_token_env_var = ${tomlString(TOKEN_VAR)}`);
    lines.push(`http_headers = { ${agent} }`);
  } else {
    const auth = credentials.token ? `Authorization = ${tomlString(`Bearer ${credentials.token}`)}, ` : '';
    lines.push(`http_headers = { ${auth}${agent} }`);
  }
  return `${lines.join('\n')}\n`;
}

/** Where Claude Code and Codex look for personal skills; ours goes in its own folder. */
export function skillDirs(home: string, join: (...parts: string[]) => string): Record<'claude' | 'codex', string> {
  return { claude: join(home, '.claude', 'skills', MCP_SERVER_NAME), codex: join(home, '.codex', 'skills', MCP_SERVER_NAME) };
}
