import type { ErrorRequestHandler } from 'express';
import { BridgeError } from '../core/bridgeError';
import { httpStatus } from '../core/outcome';
import type { Log } from '../core/log';
import { bodyTooLarge, loggedPath } from './security';
import { errorMessage } from '../core/errorMessage';

/** What body-parser (express.json) and the router attach to the errors they raise. */
interface HttpError {
  status: number;
  type?: string;
  charset?: string;
  encoding?: string;
}

const isHttpError = (e: unknown): e is HttpError & Error =>
  e instanceof Error && typeof (e as Partial<HttpError>).status === 'number';

/** The BridgeError a library's client error stands for, in the bridge's own words. */
function fromLibrary(error: HttpError & Error, maxBodyBytes: number): BridgeError | undefined {
  if (error.status >= 500) return undefined;
  switch (error.type) {
    case 'entity.too.large':
      return bodyTooLarge(maxBodyBytes);
    case 'entity.parse.failed':
      return new BridgeError('bad_input', 'Malformed JSON body: send a JSON object');
    case 'charset.unsupported':
      return new BridgeError('unsupported_media', `Charset '${error.charset ?? ''}' is not supported: send UTF-8 JSON`);
    case 'encoding.unsupported':
      return new BridgeError(
        'unsupported_media',
        `Content-Encoding '${error.encoding ?? ''}' is not supported: send the JSON uncompressed`,
      );
    case 'request.aborted':
      // The client is gone: the answer reaches nobody, but it must not count as the bridge's fault.
      return new BridgeError('bad_input', 'The request body ended early: the client closed the connection');
  }
  // The router's "Failed to decode param '%ZZ'".
  if (error instanceof URIError) {
    const segment = /'(.*)'/.exec(error.message)?.[1] ?? '';
    return new BridgeError('bad_input', `Malformed percent-encoding in the path segment '${segment}'`);
  }
  // What is left (a malformed Content-Length, say) is the client's too.
  return new BridgeError(error.status === 413 ? 'too_large' : 'bad_input', `Unreadable request: ${error.message}`);
}

/** The one place an error becomes an answer: JSON `{detail, ...extra}` with its status. */
export function errorHandler(options: { maxBodyBytes: number; log: Log }): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    if (res.headersSent) {
      // A stream already under way: all that is left is to end it.
      res.end();
      return;
    }
    const known =
      error instanceof BridgeError ? error : isHttpError(error) ? fromLibrary(error, options.maxBodyBytes) : undefined;
    if (!known) {
      const message = errorMessage(error);
      options.log.error(`${req.method} ${loggedPath(req.path)} failed: ${error instanceof Error ? error.stack : message}`);
      res.status(httpStatus('internal')).json({ detail: `Internal error: ${message}` });
      return;
    }
    if (known instanceof MethodNotAllowed) res.setHeader('Allow', known.allow.join(', '));
    // An oversized body is left unread: close the connection rather than drain it.
    if (known.kind === 'too_large') res.setHeader('Connection', 'close');
    res.status(known.status).json({ detail: known.detail, ...known.extra });
  };
}

/** A 405: the answer carries `Allow` with the methods the path does take. */
export class MethodNotAllowed extends BridgeError {
  constructor(
    readonly allow: readonly string[],
    detail: string,
  ) {
    super('method_not_allowed', detail);
  }
}
