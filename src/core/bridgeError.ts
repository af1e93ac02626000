import { httpStatus, type ErrorKind, type Outcome } from './outcome';

/**
 * The one error type handlers and services throw to end a request: an Outcome (outcome.ts) that
 * is not ok. `detail` is the sentence an agent reads (marimo's clients print it); `extra` adds
 * machine-readable fields to the answer (e.g. the current cell on a stale write). Its HTTP status
 * follows from its kind, as does every other transport's answer.
 */
export class BridgeError extends Error implements Outcome {
  constructor(
    readonly kind: ErrorKind,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'BridgeError';
  }

  get status(): number {
    return httpStatus(this.kind);
  }
}
