import type { Kernel } from './kernelPort';

/** One open notebook the bridge knows about. */
export interface SessionInfo {
  /** marimo-style id (`s_` + 6 of [0-9a-z]), stable while the notebook stays open. */
  readonly id: string;
  /** Absolute file path, or null for an untitled notebook. */
  readonly path: string | null;
  readonly uri: string;
  readonly notebookType: string;
}

/** A kernel the bridge can select and start for a notebook. */
export type KernelChoice = 'builtin' | 'jupyter' | 'marimo';

export interface StartedKernel {
  readonly session: SessionInfo;
  /** Kind of the kernel now serving the session ("builtin", "jupyter", "jupyter:<language>"). */
  readonly kernel: string;
}

/**
 * The notebooks side of the bridge, as the HTTP layer sees it. The VS Code implementation
 * lives in src/notebooks; unit tests use an in-memory fake.
 */
export interface NotebookHost {
  /** Open notebooks that code can run in right now, in a stable order. */
  sessions(): Promise<SessionInfo[]>;
  /**
   * The kernel that serves a session, resolved per request so a kernel picked in the editor
   * takes effect at once. Throws BridgeError (404 unknown session, 409/503 no usable kernel).
   */
  kernelFor(sessionId: string): Promise<Kernel>;
  /**
   * Opens a notebook file in the editor without taking focus (or shows it if open) and,
   * when asked, selects and starts a kernel for it.
   */
  open(path: string, options: { kernel?: KernelChoice | undefined }): Promise<SessionInfo>;
  /**
   * Selects and starts a kernel for a notebook (session id or absolute path; opened if needed),
   * as the person would from the kernel picker. Throws BridgeError when it cannot.
   */
  startKernel(notebook: string, kernel: KernelChoice): Promise<StartedKernel>;
}
