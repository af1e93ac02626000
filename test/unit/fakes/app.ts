import { ScratchpadOutputs } from '../../../src/core/outputs/scratchpadOutputs';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Gate } from '../../../src/core/agents/accessPolicy';
import type { CodeAnalyzer } from '../../../src/core/model/codeChecks';
import type { NotebookHost } from '../../../src/core/model/notebookHost';
import { KeyedQueue } from '../../../src/core/flow/keyedQueue';
import type { Log } from '../../../src/core/log';
import { Checkpoints } from '../../../src/core/cells/checkpoints';

import { RiskChecks } from '../../../src/core/cells/riskChecks';
import { RunHistory } from '../../../src/core/runs/runHistory';
import type { RiskScanner } from '../../../src/core/model/riskScan';
import { NotebookCells, type NotebookCellsOptions } from '../../../src/core/cells/notebookCells';
import { MARIMO_PROTOCOL_VERSION } from '../../../src/core/runs/marimoVersion';
import type { Presence } from '../../../src/core/agents/presence';
import { lazyMcp } from '../../../src/mcp/lazy';
import { createApp, listen, type RunningServer } from '../../../src/server/app';
import { BearerCheck } from '../../../src/server/bearerCheck';
import { guardRoutes } from '../../../src/server/guardRoutes';
import { limitHeld, type HeldLimits } from '../../../src/server/heldRequests';
import { routes } from '../../../src/server/routes';
import { FakeNotebookHost } from './notebookHost';
import { FakeNotebooks } from './notebooks';

export const TEST_TOKEN = 'test-token-0123456789';

/** A fake risk scanner that finds nothing in any code (the tests of other rules). */
export const NOTHING_FOUND: RiskScanner = { scan: () => Promise.resolve({ findings: [] }) };
export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * The real app (middleware, route table, cell rules) on a loopback port, over fakes of the
 * editor side only.
 */
export function startTestServer(options: {
  host?: NotebookHost;
  notebooks?: FakeNotebooks;
  token?: () => string | null;
  maxBodyBytes?: number;
  outputTextLimit?: number;
  log?: Log;
  access?: Gate;
  analyzer?: CodeAnalyzer;
  presence?: Presence;
  /** Reads code for the risk scan (default: a fake that finds nothing). */
  scanner?: RiskScanner;
  /** The run history (default: an empty one kept nowhere); it records only when it is among `access`'s sinks. */
  history?: RunHistory;
  confirm?: NotebookCellsOptions['confirm'];
  heldLimits?: HeldLimits;
}): Promise<RunningServer> {
  let port = 0;
  const notebooks = options.notebooks ?? new FakeNotebooks();
  const access = options.access ?? Gate.open();
  const risk = new RiskChecks(options.scanner ?? NOTHING_FOUND, notebooks, () => access);
  const checkpoints = new Checkpoints(() => cells, { load: () => [], save: () => undefined });
  const cells = new NotebookCells(notebooks, {
    outputTextLimit: () => options.outputTextLimit ?? 100,
    onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
    ...(options.analyzer && { analyzer: options.analyzer }),
    ...(options.presence && { presence: options.presence }),
    risk,
    ...(options.confirm && { confirm: options.confirm }),
  });
  access.identities.ownsChanges = (owner) => checkpoints.owns(owner);
  const services = {
    host: options.host ?? new FakeNotebookHost([]),
    cells,
    checkpoints,
    runs: new KeyedQueue(),
    outputs: new ScratchpadOutputs(),
    version: '0.0.0-test',
    marimoVersion: () => MARIMO_PROTOCOL_VERSION,
    access,
    risk,
    history: options.history ?? new RunHistory({ load: () => [], save: () => undefined }),
    inspectProgram: () => readFileSync(join(__dirname, '../../../src/kernels/builtin/kernel_inspect.py'), 'utf8'),
  };
  const app = createApp({
    routes: limitHeld(guardRoutes(routes), options.heldLimits),
    context: { ...services, serveMcp: lazyMcp },
    token: options.token ?? (() => TEST_TOKEN),
    port: () => port,
    bearer: new BearerCheck(),
    maxBodyBytes: options.maxBodyBytes ?? 64 * 1024,
    log: options.log ?? silentLog,
  });
  return listen(app, 0, (p) => (port = p));
}
