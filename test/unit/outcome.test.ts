import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Gate, type ActionEnd, type AgentAction } from '../../src/core/agents/accessPolicy';
import { ClientRegistry } from '../../src/core/agents/clients';
import { BridgeError } from '../../src/core/bridgeError';
import {
  httpStatus,
  isToolError,
  OUTCOME_KINDS,
  recordOutcome,
  runKind,
  toolResult,
  type ErrorKind,
  type OutcomeKind,
} from '../../src/core/outcome';
import { RUN_LIMIT_DETAIL } from '../../src/core/runs/agentRuns';
import { NO_OUTPUT, type ExecResult, type Kernel } from '../../src/core/model/kernelPort';
import { ScratchpadOutputs } from '../../src/core/outputs/scratchpadOutputs';
import { KeyedQueue } from '../../src/core/flow/keyedQueue';
import { RiskChecks } from '../../src/core/cells/riskChecks';
import { NOTHING_FOUND } from './fakes/app';
import { ended } from '../../src/server/guardRoutes';
import { Reply } from '../../src/server/route';
import { registerTools, tool, type ToolAnswer } from '../../src/mcp/toolRows';
import { codeTools } from '../../src/mcp/tools';
import type { BridgeServices } from '../../src/core/services';
import { FakeNotebookHost } from './fakes/notebookHost';
import { FakeNotebooks } from './fakes/notebooks';

const RUN_ENDS: readonly OutcomeKind[] = ['ok', 'failed', 'interrupted', 'kernel_restarted', 'timed_out'];

/** The statuses the HTTP answers had before they were derived from kinds (the harness and conformance compare them). */
const STATUS_OF: Record<ErrorKind, number> = {
  refused: 403,
  forbidden: 403,
  unauthorized: 401,
  bad_input: 400,
  not_found: 404,
  method_not_allowed: 405,
  stale: 409,
  conflict: 409,
  too_large: 413,
  busy: 429,
  unsupported_media: 415,
  misdirected: 421,
  kernel_error: 502,
  kernel_timeout: 504,
  unavailable: 503,
  too_many_requests: 429,
  internal: 500,
};

/** A gate that allows everything and keeps what ended (a fake sink). */
function recordingGate(): { gate: Gate; ends: ActionEnd[] } {
  const ends: ActionEnd[] = [];
  const person = { mode: () => 'full' as const, ask: () => Promise.resolve('allow' as const), maxRunMs: () => 0 };
  const sink = { started: (_a: AgentAction) => {}, ended: (_a: AgentAction, end: ActionEnd) => void ends.push(end) };
  return { gate: new Gate(person, [sink], new ClientRegistry()), ends };
}

const action = {
  transport: 'mcp' as const,
  ...new ClientRegistry().identify(undefined, 'unit'),
  kind: 'execute' as const,
  label: 'test',
  notebook: undefined,
  code: 'x',
};

describe('one outcome type', () => {
  it('maps every kind to an HTTP status, a record outcome and an MCP result (the table is total)', () => {
    assert.equal(new Set(OUTCOME_KINDS).size, OUTCOME_KINDS.length, 'no kind twice');
    for (const kind of OUTCOME_KINDS) {
      const status = httpStatus(kind);
      assert.ok(Number.isInteger(status) && status >= 200 && status < 600, `${kind}: ${status}`);
      assert.ok(['succeeded', 'failed', 'interrupted', 'timed_out', 'refused'].includes(recordOutcome(kind)), kind);
      const result = toolResult({ kind, detail: 'd' });
      assert.equal(result.content.length, 1, kind);
      assert.equal(result.isError === true, isToolError(kind), kind);
    }
  });

  it('reports the ends of runs in a 200 answer and as MCP results; every other kind fails the request', () => {
    for (const kind of OUTCOME_KINDS) {
      if (RUN_ENDS.includes(kind)) {
        assert.equal(httpStatus(kind), 200, kind);
        assert.equal(isToolError(kind), false, kind);
      } else if (kind === 'still_running') {
        assert.equal(httpStatus(kind), 504, 'a wait that ran out answers 504 over HTTP');
        assert.equal(isToolError(kind), false, 'and is a result to read over MCP: the run goes on');
      } else {
        assert.equal(httpStatus(kind), STATUS_OF[kind as ErrorKind], kind);
        assert.equal(isToolError(kind), true, kind);
        assert.equal(new BridgeError(kind as ErrorKind, 'd').status, STATUS_OF[kind as ErrorKind], kind);
      }
    }
    assert.equal(recordOutcome('refused'), 'refused');
    assert.equal(recordOutcome('timed_out'), 'timed_out');
    assert.equal(recordOutcome('kernel_restarted'), 'interrupted');
    assert.equal(recordOutcome('stale'), 'failed');
  });

  it("reads a run's status as its kind, a restart beyond an interrupt", () => {
    assert.equal(runKind('succeeded'), 'ok');
    assert.equal(runKind('failed'), 'failed');
    assert.equal(runKind('interrupted'), 'interrupted');
    assert.equal(runKind('interrupted', true), 'kernel_restarted');
    assert.equal(runKind('timed_out'), 'timed_out');
  });

  it('answers a failure over MCP with the HTTP body (status, detail, extra), structured only for the tool its own body', () => {
    const stale = new BridgeError('stale', 'read it again', { cell: { id: 'c1' } });
    const result = toolResult(stale, undefined, { structured: true });
    assert.equal(result.isError, true);
    assert.deepEqual(JSON.parse(result.content[0]!.text), { status: 409, detail: 'read it again', cell: { id: 'c1' } });
    assert.equal(result.structuredContent, undefined, "a stand-in body does not match the tool's schema");
    const own = toolResult({ kind: 'not_found', detail: 'd' }, { success: false }, { structured: true });
    assert.deepEqual(own.structuredContent, { success: false });
  });
});

describe('transports answer by kind, never by the words of a message', () => {
  const TIMEOUT_WORDS = `Execution timed out after 1s and was interrupted: the ${RUN_LIMIT_DETAIL}`;

  async function callTools(rows: ReturnType<typeof tool>[], gate: Gate): Promise<Client> {
    const server = new McpServer({ name: 'unit', version: '0' });
    registerTools(server, gate, new ClientRegistry().identify(undefined, 'unit'), rows);
    const [a, b] = InMemoryTransport.createLinkedPair();
    await server.connect(a);
    const client = new Client({ name: 'unit', version: '0' });
    await client.connect(b);
    return client;
  }

  const row = (name: string, answer: ToolAnswer) =>
    tool({ name, access: 'execute', description: name, inputSchema: z.object({}), handle: async () => answer });

  it('MCP: a timed-out kind ends the activity timed out whatever its text; timeout words without the kind do not', async () => {
    const { gate, ends } = recordingGate();
    const client = await callTools(
      [
        row('quiet_timeout', { outcome: { kind: 'timed_out', detail: 'stopped' }, body: { error: 'stopped' } }),
        row('wordy_failure', { outcome: { kind: 'failed', detail: TIMEOUT_WORDS }, body: { error: TIMEOUT_WORDS } }),
        row('wordy_ok', { outcome: { kind: 'ok', detail: '' }, body: { errors: [TIMEOUT_WORDS] } }),
      ],
      gate,
    );
    const quiet = (await client.callTool({ name: 'quiet_timeout', arguments: {} })) as CallToolResult;
    const wordy = (await client.callTool({ name: 'wordy_failure', arguments: {} })) as CallToolResult;
    await client.callTool({ name: 'wordy_ok', arguments: {} });
    await client.close();
    assert.deepEqual(
      ends.map((e) => e.outcome),
      ['timed_out', 'failed', 'succeeded'],
    );
    assert.equal(quiet.isError, undefined);
    assert.equal(wordy.isError, undefined, 'a run that failed is reported, not a tool error');
  });

  it('MCP execute_code: a capped run is timed out by its status, with no word of it printed', async () => {
    const silent: Kernel = {
      kind: 'fake',
      status: () => ({ state: 'idle' }),
      executeScratchpad: async (): Promise<ExecResult> => ({ success: false, status: 'timed_out', output: NO_OUTPUT }),
    };
    const host = new FakeNotebookHost([
      { info: { id: 's_aaaaaa', path: '/a.ipynb', uri: 'file:///a.ipynb', notebookType: 'jupyter-notebook' }, kernel: silent },
    ]);
    const { gate, ends } = recordingGate();
    const risk = new RiskChecks(NOTHING_FOUND, new FakeNotebooks(), () => gate);
    const ctx = { host, runs: new KeyedQueue(), outputs: new ScratchpadOutputs(), risk } as unknown as BridgeServices;
    const client = await callTools(codeTools(ctx), gate);
    const result = (await client.callTool({
      name: 'execute_code',
      arguments: { session_id: 's_aaaaaa', code: 'x' },
    })) as CallToolResult;
    await client.close();
    assert.equal(result.isError, undefined);
    assert.equal((result.structuredContent as { success: boolean }).success, false);
    assert.deepEqual(
      ends.map((e) => e.outcome),
      ['timed_out'],
    );
  });

  it("HTTP: an answer's activity ends as its Reply's kind; words in a 200 body change nothing", async () => {
    const { gate, ends } = recordingGate();
    await ended((await gate.enter(action))!, () => Reply.of('timed_out', { detail: 'stopped' }));
    await ended((await gate.enter(action))!, () => ({ detail: TIMEOUT_WORDS, success: false }));
    await ended((await gate.enter(action))!, () => Reply.of('still_running', { detail: 'wait again' }));
    await assert.rejects(ended((await gate.enter(action))!, () => Promise.reject(new BridgeError('refused', TIMEOUT_WORDS))));
    assert.deepEqual(
      ends.map((e) => e.outcome),
      ['timed_out', 'succeeded', 'timed_out', 'refused'],
    );
    assert.equal(Reply.of('still_running', {}).status, 504);
    assert.equal(Reply.of('failed', {}).status, 200);
  });
});
