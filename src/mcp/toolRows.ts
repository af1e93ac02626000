import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema, type CallToolResult, type Tool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { actionCode, alsoRuns, type AccessKind, type Gate } from '../core/agents/accessPolicy';
import type { Caller } from '../core/agents/clients';
import { asAuthor, authorOf, type Author } from '../core/cells/checkpoints';
import { BridgeError } from '../core/bridgeError';
import { errorBody, toolResult, type Outcome } from '../core/outcome';
import { errorMessage } from '../core/errorMessage';
// The SDK validates tool arguments itself: this names the allowed keys in its unknown-key message.
import '../core/text/inputErrors';

type Fields = Record<string, unknown>;

/**
 * What a tool handler is given besides its arguments: the call's abort signal (cancel or "Stop
 * Agents"), and the Host the request was sent to (to give urls the client can reach).
 */
export type ToolExtra = { signal: AbortSignal; host?: string | undefined };

export type ImageContent = { type: 'image'; data: string; mimeType: string };

/**
 * What a tool handler answers: its outcome, the JSON it found (absent: a failure answers with its
 * own status, detail and extra fields, as over HTTP) and images to send beside it.
 */
export interface ToolAnswer {
  readonly outcome: Outcome;
  readonly body?: object;
  readonly images?: readonly ImageContent[];
}

/** An answer that is what the tool found, ending as `kind` (default ok); its detail is the body's, if any. */
export class Found implements ToolAnswer {
  readonly outcome: Outcome;

  constructor(
    readonly body: object,
    kind: Outcome['kind'] = 'ok',
    readonly images: readonly ImageContent[] = [],
  ) {
    const detail = (body as Fields)['detail'];
    this.outcome = { kind, detail: typeof detail === 'string' ? detail : '' };
  }
}

export const found = (body: object, kind?: Outcome['kind'], images?: readonly ImageContent[]) => new Found(body, kind, images);

/**
 * One MCP tool, declared as a row the way routes are rows of the route table: its name, what kind
 * of action it is for the access policy, the label its activity carries, and its handler.
 */
export interface ToolRow {
  readonly name: string;
  readonly access: Exclude<AccessKind, 'open' | 'gateway'>;
  /** The activity's label (default `mcp <name>`). */
  readonly label?: string;
  readonly description: string;
  readonly inputSchema?: z.ZodType;
  readonly outputSchema?: z.ZodType;
  readonly annotations?: ToolAnnotations;
  /** What it does, for the person's prompt and the record, where its arguments do not say (default: them, as JSON). */
  describe?(args: Fields, author: Author): string;
  handle(args: Fields, extra: ToolExtra): Promise<ToolAnswer>;
}

/** A typed row: the handler sees its arguments as its input schema parses them. */
export function tool<I extends z.ZodType = z.ZodObject<Record<string, never>>>(
  row: Omit<ToolRow, 'inputSchema' | 'handle' | 'describe'> & {
    inputSchema?: I;
    describe?(args: z.output<I>, author: Author): string;
    handle(args: z.output<I>, extra: ToolExtra): Promise<ToolAnswer>;
  },
): ToolRow {
  return row as ToolRow;
}

/**
 * Registers the rows on `server`, each behind the access policy and the activity record. The
 * tool's result and its activity's end both follow from the handler's outcome (a refusal's too);
 * "Stop Agents" aborts the call as the client's cancel would.
 */
export function registerTools(server: McpServer, gate: Gate, caller: Caller, rows: readonly ToolRow[]): void {
  for (const row of rows) {
    const { name, access: kind, description, inputSchema, outputSchema, annotations } = row;
    const reply = (answer: ToolAnswer): CallToolResult => {
      const result = toolResult(answer.outcome, answer.body, { structured: outputSchema !== undefined });
      return answer.images?.length ? { ...result, content: [...result.content, ...answer.images] } : result;
    };
    const guarded = async (...params: unknown[]): Promise<CallToolResult> => {
      // The SDK passes (args, extra), or (extra) alone to a tool without an input schema.
      const sdkExtra = params[params.length - 1] as { signal: AbortSignal; requestInfo?: { headers?: Record<string, unknown> } };
      const host = sdkExtra.requestInfo?.headers?.['host'];
      const extra: ToolExtra = { signal: sdkExtra.signal, host: typeof host === 'string' ? host : undefined };
      const args = params.length > 1 ? (params[0] as Fields) : {};
      const { notebook, session_id: session, code, ...rest } = args;
      let activity;
      try {
        activity = await gate.enter({
          transport: 'mcp',
          ...caller,
          left: extra.signal,
          // A dry run only reads the code (the risk scan): nothing runs.
          kind: rest['dryRun'] === true || rest['dry_run'] === true ? 'read' : kind,
          ...(kind === 'edit' && alsoRuns(rest['run'])
            ? { also: ['run'] as const, label: `${row.label ?? `mcp ${name}`} (edit and run)` }
            : { label: row.label ?? `mcp ${name}` }),
          notebook: typeof notebook === 'string' ? notebook : typeof session === 'string' ? session : undefined,
          code: row.describe ? row.describe(args, authorOf(caller)) : actionCode(code, rest),
        });
      } catch (error) {
        if (!(error instanceof BridgeError)) throw error;
        return reply({ outcome: error });
      }
      // A read is its caller's too ("my changes").
      if (!activity) return reply(await asAuthor(authorOf(caller), () => row.handle(args, extra)));
      const stop = new AbortController();
      const unlisten = activity.onStop(() => stop.abort());
      try {
        const own = { ...extra, signal: AbortSignal.any([extra.signal, stop.signal]) };
        const answer = await activity.within(() => asAuthor(authorOf(activity.action), () => row.handle(args, own)));
        activity.noteJson(answer.body ?? errorBody(answer.outcome));
        activity.end(answer.outcome.kind, answer.outcome.detail);
        return reply(answer);
      } catch (error) {
        activity.end('internal', errorMessage(error));
        throw error;
      } finally {
        unlisten();
      }
    };
    const config = { description, inputSchema, outputSchema, annotations };
    (server.registerTool as (name: string, config: object, cb: typeof guarded) => unknown).call(server, name, config, guarded);
  }
}

/**
 * Answers `tools/list` with the rows' schemas as compact JSON Schema: every byte of the list is
 * read by the model at the start of each session. What says nothing to a model is left out: the
 * `$schema` line of each schema, `propertyNames` of string keys,
 * and the SDK's `execution` (tasks are not supported, which is also what its absence says); nor
 * what the arguments' check says better when it refuses them: strings' `minLength: 1`, bounds
 * (`minimum`, `maximum`, `minItems`, `maxItems`), patterns, and objects' `additionalProperties: false` (an
 * empty string, a value out of bounds or an unknown key is refused naming it). A union of objects
 * told apart by `op` (edit_cells' ops) is listed as one object: the ops by name and their fields
 * together; the check still refuses a field that the op does not take, naming those it takes.
 */
export function serveCompactToolList(server: McpServer, rows: readonly ToolRow[]): void {
  const schema = (zod: z.ZodType, io: 'input' | 'output') => {
    const { $schema: _drop, ...json } = z.toJSONSchema(zod, {
      target: 'draft-7',
      io,
      override: ({ jsonSchema: s }) => {
        if (s.minLength === 1) delete s.minLength;
        if (s.propertyNames && Object.keys(s.propertyNames).join() === 'type') delete s.propertyNames;
        if (s.additionalProperties === false || isEmptySchema(s.additionalProperties)) delete s.additionalProperties;
        if (isEmptySchema(s.properties) && !s.required) delete s.properties;
        for (const bound of ['minimum', 'exclusiveMinimum', 'maximum', 'minItems', 'maxItems', 'pattern'] as const)
          delete s[bound];
      },
    });
    return mergeOpUnions(json) as typeof json;
  };
  const tools: Tool[] = rows.map((row) => ({
    name: row.name,
    description: row.description,
    inputSchema: (row.inputSchema ? schema(row.inputSchema, 'input') : { type: 'object', properties: {} }) as Tool['inputSchema'],
    ...(row.outputSchema ? { outputSchema: schema(row.outputSchema, 'output') as Tool['outputSchema'] } : {}),
    ...(row.annotations ? { annotations: row.annotations } : {}),
  }));
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }));
}

const isEmptySchema = (value: unknown) =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

type JsonSchema = { [key: string]: unknown };

/** A `oneOf` of objects each with a constant `op` becomes one object: `op` an enum, the fields merged. */
function mergeOpUnions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(mergeOpUnions);
  if (typeof node !== 'object' || node === null) return node;
  const out: JsonSchema = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, mergeOpUnions(v)]));
  const variants = out['oneOf'];
  const ops = Array.isArray(variants)
    ? (variants as JsonSchema[]).map(
        (v) => ((v['properties'] as JsonSchema | undefined)?.['op'] as JsonSchema | undefined)?.['const'],
      )
    : [];
  if (!ops.length || ops.some((op) => typeof op !== 'string')) return out;
  const properties: JsonSchema = { op: { type: 'string', enum: ops } };
  for (const v of variants as JsonSchema[])
    for (const [name, field] of Object.entries(v['properties'] as JsonSchema)) if (name !== 'op') properties[name] ??= field;
  const { oneOf: _variants, ...rest } = out;
  return { ...rest, type: 'object', properties, required: ['op'] };
}
