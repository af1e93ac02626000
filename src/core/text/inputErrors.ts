/**
 * How a request's input is refused: every issue as `field: message`, and an unknown key answered
 * with the keys allowed there. Both transports validate with the same schemas (cellSchemas.ts),
 * but the MCP SDK parses tool arguments itself, with its own wording around zod's messages; so
 * the allowed keys are put into zod's own message for that issue, once for the process, and the
 * route table and the SDK both say them.
 */
import { z } from 'zod';

type Issue = Parameters<NonNullable<Parameters<typeof z.config>[0]>['customError'] & object>[0];

/** zod's message for an unknown key, with the keys the object that refused it takes (undefined: zod's own message). */
function unknownKeyMessage(issue: Issue): string | undefined {
  if (issue.code !== 'unrecognized_keys') return undefined;
  const shape = (issue.inst as { _zod?: { def?: { shape?: Record<string, unknown> } } } | undefined)?._zod?.def?.shape;
  const keys = issue.keys.map((k) => JSON.stringify(k)).join(', ');
  const allowed = shape ? ` (allowed: ${Object.keys(shape).join(', ')})` : '';
  return `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${keys}${allowed}`;
}

z.config({ customError: unknownKeyMessage });

/** Each issue as `field: message`. */
export function describeZodError(where: string, error: z.ZodError): string {
  const issues = error.issues.map((issue) => `${issue.path.length ? issue.path.join('.') : '(root)'}: ${issue.message}`);
  return `Invalid ${where}: ${issues.join('; ')}`;
}
