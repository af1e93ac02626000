import { actionCode, alsoRuns, type AccessKind, type Activity, type Gate } from '../core/agents/accessPolicy';
import { CREDENTIAL_HEADER, httpCaller, readerOf } from '../core/agents/clients';
import { agentHost, cappedCells } from '../core/runs/agentRuns';
import { asAuthor, authorOf } from '../core/cells/checkpoints';
import type { CellService } from '../core/model/cellService';
import { BridgeError } from '../core/bridgeError';
import type { NotebookHost } from '../core/model/notebookHost';
import { Reply, type Route, type RouteInput } from './route';
import { errorMessage } from '../core/errorMessage';

type Fields = Record<string, unknown>;
const fields = (value: unknown): Fields => (value && typeof value === 'object' ? (value as Fields) : {});

/**
 * The access policy and the activity record around every row of the route table: one wrapper,
 * applied where the table is mounted. Each row says what kind of action it is; the policy rules
 * on it (a refusal is a 403 before the handler runs), and edits, executes and runs are recorded
 * with their outcome. Scratchpad runs also get the person's run limit and "Stop Agents".
 */
export function guardRoutes<Ctx extends { host: NotebookHost; cells: CellService; access: Gate }>(
  rows: readonly Route<Ctx>[],
): Route<Ctx>[] {
  return rows.map((row) => {
    const rowKind: AccessKind = row.access ?? (row.method === 'get' ? 'read' : 'edit');
    if (rowKind === 'open') return row;
    const label = row.activity ?? `${row.method.toUpperCase()} ${row.path}`;
    return {
      ...row,
      handle: async (input: RouteInput<unknown, unknown>, ctx: Ctx) => {
        // A dry run only reads the code (the risk scan): nothing runs.
        const kind = isDryRun(input.body, input.query) ? 'read' : rowKind;
        const caller = httpCaller(ctx.access.identities, input.req.headers);
        const runs = kind === 'edit' && alsoRuns(fields(input.body)['run']);
        const activity = await ctx.access.enter({
          ...(runs ? { also: ['run'] as const, label: `${label} (edit and run)` } : { label }),
          left: leaving(input.res),
          transport: 'http',
          ...caller,
          issue: (credential) => {
            if (!input.res.headersSent) input.res.setHeader(CREDENTIAL_HEADER, credential);
          },
          kind,
          notebook: notebookOf(input),
          code:
            kind === 'read' || kind === 'gateway'
              ? ''
              : row.describe
                ? row.describe(input, ctx, authorOf(caller))
                : codeOf(input),
        });
        const limit = ctx.access.maxRunMs;
        const cells = ctx.cells.as(readerOf(caller)); // read-before-write is kept per client
        const scoped =
          kind === 'execute' || kind === 'gateway'
            ? { ...ctx, host: agentHost(ctx.host, activity, limit), cells: cappedCells(cells, activity, limit) }
            : kind === 'run' || kind === 'edit'
              ? { ...ctx, cells: cappedCells(cells, activity, limit) }
              : { ...ctx, cells };
        // A read is its caller's too ("my changes").
        if (!activity) return asAuthor(authorOf(caller), () => row.handle(input, scoped));
        return ended(activity, () => row.handle(input, scoped));
      },
    };
  });
}

/** `dryRun: true` in the body (or the query of a cell run). */
const isDryRun = (body: unknown, query: unknown) => fields(body)['dryRun'] === true || fields(query)['dryRun'] === true;

/** Aborted if the client closes its connection before the answer is sent (listened for before any wait). */
export function leaving(res: RouteInput<unknown, unknown>['res']): AbortSignal {
  const left = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) left.abort();
  });
  return left.signal;
}

function notebookOf({ body, query, req }: RouteInput<unknown, unknown>): string | undefined {
  const named = fields(body)['notebook'] ?? fields(query)['notebook'] ?? req.headers['marimo-session-id'];
  return typeof named === 'string' ? named : undefined;
}

/** The code an action runs or puts in a cell; else the change it asks for (its inputs but the notebook, as JSON). */
function codeOf({ body, query, params }: RouteInput<unknown, unknown>): string {
  const { code, notebook: _n, ...rest } = { ...fields(query), ...fields(body), ...params };
  return actionCode(code, rest);
}

/** Runs a handler as its activity (the author of the changes it makes), ending it with its answer's outcome. */
export async function ended<T>(activity: Activity, run: () => Promise<T> | T): Promise<T> {
  try {
    const result = await activity.within(() => asAuthor(authorOf(activity.action), run));
    const body = fields(result instanceof Reply ? result.body : result);
    if (result !== undefined) activity.noteJson(body);
    activity.end(result instanceof Reply ? result.kind : 'ok', typeof body['detail'] === 'string' ? body['detail'] : '');
    return result;
  } catch (error) {
    if (error instanceof BridgeError) activity.end(error.kind, error.detail);
    else activity.end('internal', errorMessage(error));
    throw error;
  }
}
