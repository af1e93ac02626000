import { strict as assert } from 'node:assert';
import { codexToml, jsonServerEntry, mergeMcpJson } from '../../src/core/agents/agentConfig';

const literal = { mode: 'literal', url: 'http://127.0.0.1:41234', token: 'tok' } as const;
const terminal = { mode: 'terminal', url: 'http://127.0.0.1:41234', tokenRequired: true } as const;

describe('agent MCP configs', () => {
  describe('entries', () => {
    it('Claude Code: type http, the URL, the token as a bearer header and the agent-name header', () => {
      assert.deepEqual(jsonServerEntry('claude', literal), {
        type: 'http',
        url: 'http://127.0.0.1:41234/mcp/server',
        headers: { Authorization: 'Bearer tok', 'X-Agent-Bridge-Client': 'claude-code' },
      });
    });
    it('Claude Code from the terminal environment: ${VAR} references, no secret in the file', () => {
      assert.deepEqual(jsonServerEntry('claude', terminal), {
        type: 'http',
        url: '${AGENT_BRIDGE_URL}/mcp/server',
        headers: { Authorization: 'Bearer ${MARIMO_TOKEN}', 'X-Agent-Bridge-Client': 'claude-code' },
      });
    });
    it('Cursor: url and headers; no Authorization header when the token is off', () => {
      assert.deepEqual(jsonServerEntry('cursor', literal), {
        url: 'http://127.0.0.1:41234/mcp/server',
        headers: { Authorization: 'Bearer tok', 'X-Agent-Bridge-Client': 'cursor' },
      });
      assert.deepEqual(jsonServerEntry('cursor', { ...literal, token: null }), {
        url: 'http://127.0.0.1:41234/mcp/server',
        headers: { 'X-Agent-Bridge-Client': 'cursor' },
      });
      assert.throws(() => jsonServerEntry('cursor', terminal));
    });
    it('Codex: a TOML table with a header, or the token variable', () => {
      assert.equal(
        codexToml(literal),
        '[mcp_servers.agent-bridge]\nurl = "http://127.0.0.1:41234/mcp/server"\nhttp_headers = { Authorization = "Bearer tok", "X-Agent-Bridge-Client" = "codex" }\n',
      );
      assert.equal(
        codexToml(terminal),
        '[mcp_servers.agent-bridge]\nurl = "http://127.0.0.1:41234/mcp/server"\nbearer_token_env_var = "MARIMO_TOKEN"\nhttp_headers = { "X-Agent-Bridge-Client" = "codex" }\n',
      );
    });
  });

  describe('merging into an existing mcp.json', () => {
    const entry = { type: 'http', url: 'http://127.0.0.1:1/mcp/server' };
    it('creates the file when there is none (or it is empty)', () => {
      for (const existing of [undefined, '', '  \n']) {
        assert.deepEqual(JSON.parse(mergeMcpJson(existing, 'agent-bridge', entry)), { mcpServers: { 'agent-bridge': entry } });
      }
    });
    it('keeps every other server and key, in order, and replaces only its own entry', () => {
      const existing = JSON.stringify({
        other: 1,
        mcpServers: { github: { command: 'gh' }, 'agent-bridge': { url: 'old' }, z: { url: 'z' } },
      });
      const merged = JSON.parse(mergeMcpJson(existing, 'agent-bridge', entry));
      assert.deepEqual(merged, { other: 1, mcpServers: { github: { command: 'gh' }, 'agent-bridge': entry, z: { url: 'z' } } });
      assert.deepEqual(Object.keys(merged.mcpServers), ['github', 'agent-bridge', 'z']);
    });
    it('adds mcpServers to a config that has none', () => {
      assert.deepEqual(JSON.parse(mergeMcpJson('{"a": true}', 'agent-bridge', entry)), {
        a: true,
        mcpServers: { 'agent-bridge': entry },
      });
    });
    it('edits in place: comments, indentation and the other entries stay', () => {
      const existing = '{\n    // servers for this repo\n    "mcpServers": {\n        "github": { "command": "gh" }\n    }\n}\n';
      const merged = mergeMcpJson(existing, 'agent-bridge', { url: 'u' });
      assert.equal(
        merged,
        '{\n    // servers for this repo\n    "mcpServers": {\n        "github": {\n            "command": "gh"\n        },\n        "agent-bridge": {\n            "url": "u"\n        }\n    }\n}\n',
      );
      assert.equal(mergeMcpJson(merged, 'agent-bridge', { url: 'v' }), merged.replace('"u"', '"v"'));
    });
    it('refuses to overwrite what it cannot read', () => {
      assert.throws(() => mergeMcpJson('{ "a": }', 'agent-bridge', entry, '.mcp.json'), /\.mcp\.json is not valid JSON/);
      assert.throws(() => mergeMcpJson('[1]', 'agent-bridge', entry), /not hold a JSON object/);
      assert.throws(() => mergeMcpJson('{"mcpServers": []}', 'agent-bridge', entry), /"mcpServers" .* is not an object/);
    });
  });
});
