/**
 * The one error type handlers and services throw to answer a request with a status.
 * `detail` is the sentence an agent reads (marimo's clients print it); `extra` adds
 * machine-readable fields to the JSON body (e.g. the current cell on a 409).
 */
export class BridgeError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'BridgeError';
  }
}
