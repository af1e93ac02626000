import type { Kernel } from '../model/kernelPort';
import type { KeyedQueue } from '../flow/keyedQueue';
import { runScratchpad } from './scratchpadRuns';

/**
 * The `version` the bridge gives where marimo gives its own (the server registry entry that
 * marimo-pair's discover-servers.sh passes on, `/health`): a marimo version, since agents
 * following marimo-pair's skill compare it with the marimo that shipped code mode (0.21.1) and
 * ask the person to upgrade when it is older. It is the marimo of a notebook's marimo kernel
 * where the bridge serves one, else the marimo whose server surface the bridge mirrors. The
 * bridge's own version is given under a key of its own (`bridgeVersion`).
 */

/** The marimo whose HTTP surface, event stream and code mode the bridge mirrors: the one its conformance suite compares it with (scripts/venv-requirements.txt pins it). */
export const MARIMO_PROTOCOL_VERSION = '0.25.2';

/** Marks the line the version program prints (plain text: marimo's extension drops control characters). */
const MARKER = 'agent-bridge-marimo-version:';
/** Binds no name (a scratchpad discards them anyway) and prints the kernel's marimo version. */
export const VERSION_PROGRAM = `print(${JSON.stringify(MARKER)} + __import__("marimo").__version__)`;
const PROBE_TIMEOUT_MS = 30_000;

/** The version the program printed, if it did. */
export function parseVersion(stdout: string): string | undefined {
  return new RegExp(`${MARKER}(\\d+\\.\\d+[\\w.+-]*)`).exec(stdout)?.[1];
}

/**
 * The marimo versions of the notebooks' marimo kernels, each read once with a scratchpad run in
 * the session's turn (so it never overlaps an agent's run of that notebook).
 */
export class MarimoVersions {
  /** Session id → its kernel's marimo version (null: the read failed; not tried again). */
  private readonly known = new Map<string, string | null>();

  constructor(
    private readonly runs: KeyedQueue,
    /** Called when a version was learned (the discovery files are written again). */
    private readonly onLearned: () => void,
  ) {}

  /** The marimo version agents are given: a marimo kernel's, else MARIMO_PROTOCOL_VERSION. */
  current(): string {
    for (const version of this.known.values()) if (version) return version;
    return MARIMO_PROTOCOL_VERSION;
  }

  /** Reads, in the background, the marimo version of each marimo kernel not read yet; forgets closed sessions. */
  learn(sessions: readonly { id: string }[], marimoKernel: (sessionId: string) => Promise<Kernel | undefined>): void {
    const open = new Set(sessions.map((s) => s.id));
    for (const id of this.known.keys()) if (!open.has(id)) this.known.delete(id);
    for (const { id } of sessions) {
      if (this.known.has(id)) continue;
      this.known.set(id, null);
      void this.read(id, marimoKernel).then((version) => {
        if (!this.known.has(id)) return;
        if (version === undefined) {
          // No marimo kernel yet (none selected): ask again at the next change of the sessions.
          this.known.delete(id);
          return;
        }
        this.known.set(id, version);
        if (version) this.onLearned();
      });
    }
  }

  /** The kernel's marimo version; null when it could not be read; undefined when no marimo kernel serves the session. */
  private async read(
    id: string,
    marimoKernel: (sessionId: string) => Promise<Kernel | undefined>,
  ): Promise<string | null | undefined> {
    const kernel = await marimoKernel(id).catch(() => undefined);
    if (!kernel) return undefined;
    let stdout = '';
    const result = await runScratchpad(
      this.runs,
      id,
      kernel,
      VERSION_PROGRAM,
      (e) => {
        if (e.name === 'stdout') stdout += e.text;
      },
      AbortSignal.timeout(PROBE_TIMEOUT_MS),
    ).catch(() => null);
    return (result?.success && parseVersion(stdout)) || null;
  }
}
