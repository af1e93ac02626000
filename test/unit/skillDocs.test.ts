/**
 * The agent skill cannot drift from the code: every route of the table and every MCP tool is
 * named in skills/agent-bridge/, and every JSON request example there is a valid body of a route.
 */
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { cellTools } from '../../src/mcp/cellTools';
import { codeTools } from '../../src/mcp/tools';
import { presenceTool } from '../../src/mcp/presenceTool';
import { runTools } from '../../src/mcp/runTools';
import { clearBody, createBody, editBody, editsBody, runManyBody, saveBody } from '../../src/core/cells/cellSchemas';
import { routes, type RouteContext } from '../../src/server/routes';

const SKILL = path.join(__dirname, '..', '..', 'skills', 'agent-bridge');

function skillText(): string {
  const files = ['SKILL.md', ...fs.readdirSync(path.join(SKILL, 'reference')).map((f) => path.join('reference', f))];
  return files.map((f) => fs.readFileSync(path.join(SKILL, f), 'utf8')).join('\n');
}

/** `:ref` in the table, `<ref>` in the docs: both become `<>`. */
const normalize = (p: string) => p.replace(/:[A-Za-z]+|<[^>]+>/g, '<>');

/** Rows that only answer 405 (MCP is POST-only) or alias another row. */
const UNDOCUMENTED = new Set(['GET /mcp/server', 'DELETE /mcp/server', 'GET /healthz']);

function toolNames(): string[] {
  const ctx = {} as RouteContext;
  return [
    ...codeTools(ctx),
    ...cellTools(ctx),
    ...runTools(ctx, { client: '', about: '', claim: undefined, credential: undefined, owner: undefined }),
    presenceTool(ctx),
  ].map((t) => t.name);
}

describe('the agent skill documents the code', () => {
  const text = skillText();
  const documented = new Set(
    [...text.matchAll(/\b(GET|POST|PATCH|DELETE|PUT) (\/[^\s`|?)]*)/g)].map((m) => `${m[1]} ${normalize(m[2]!)}`),
  );

  it('names every route of the table as "METHOD /path"', () => {
    const missing = routes
      .map((r) => `${r.method.toUpperCase()} ${r.path}`)
      .filter((row) => !UNDOCUMENTED.has(row))
      .filter((row) => !documented.has(normalize(row)));
    assert.deepEqual(missing, [], `routes missing from ${SKILL}`);
  });

  it('names every MCP tool', () => {
    const names = toolNames();
    assert.ok(names.length >= 15, names.join());
    assert.deepEqual(
      names.filter((n) => !text.includes(`\`${n}\``)),
      [],
    );
  });

  // What an agent reads before it calls anything: the first screen, up to the scratchpad section.
  const firstScreen = fs.readFileSync(path.join(SKILL, 'SKILL.md'), 'utf8').split(/^## 2\./m)[0]!;

  it('its first example is the brief list of the cells', () => {
    const first = /```bash\n([^\n]*)/.exec(firstScreen)?.[1] ?? '';
    assert.match(first, /\/notebooks\/cells\?[^"]*view=brief/);
  });

  it('says on its first screen that a scratchpad run stops with its client, and that long work goes in a cell with /wait', () => {
    assert.match(firstScreen, /scratchpad run stops when your client disconnects/i);
    assert.match(firstScreen, /long work belongs in a\s+cell[\s\S]*POST \/notebooks\/cells\/<id>\/wait/);
  });

  it('every JSON request example is a valid body of a route', () => {
    const examples = [...text.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1]!);
    assert.ok(examples.length >= 2);
    const schemas = [editsBody, runManyBody, clearBody, saveBody, createBody, editBody];
    for (const example of examples) {
      const body: unknown = JSON.parse(example);
      assert.ok(
        schemas.some((s) => s.safeParse(body).success),
        `no route accepts this example:\n${example}`,
      );
    }
  });
});
