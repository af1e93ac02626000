import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { AccessKind } from '../core/access';
import { BridgeError } from '../core/errors';
import type { Method } from './router';

/** What a handler receives: inputs already validated against the route's schemas. */
export interface RouteInput<B, Q> {
  body: B;
  query: Q;
  params: Record<string, string>;
  req: IncomingMessage;
  res: ServerResponse;
}

/** A non-200 JSON answer (201 Created, 202 Accepted, 504 with a body, ...). */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

/**
 * One row of the route table. A handler returns the JSON to send (200), a Reply, or nothing
 * after it wrote the response itself (event streams).
 */
export interface Route<Ctx, B = unknown, Q = unknown> {
  method: Method;
  path: string;
  body?: z.ZodType<B>;
  query?: z.ZodType<Q>;
  /** What the person's access policy sees (default: GET reads, other methods edit). */
  access?: AccessKind;
  /** The activity view's name for it (default: `METHOD path`). */
  activity?: string;
  handle(input: RouteInput<B, Q>, ctx: Ctx): unknown;
}

/** Declares a row with its input types inferred from its schemas. */
export function route<Ctx, B = undefined, Q = undefined>(r: Route<Ctx, B, Q>): Route<Ctx> {
  return r as unknown as Route<Ctx>;
}

export function describeZodError(where: string, error: z.ZodError): string {
  const issues = error.issues.map((issue) => {
    const field = issue.path.length ? issue.path.join('.') : '(root)';
    return `${field}: ${issue.message}`;
  });
  return `Invalid ${where}: ${issues.join('; ')}`;
}

/** A row's input checked against its schema (400 naming each bad field); no schema, no input. */
export function validate<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) throw new BridgeError(400, describeZodError(where, result.error));
  return result.data;
}
