import type { RequestHandler } from 'express';
import { parse as parseContentType } from 'content-type';
import { BridgeError } from '../core/errors';

/**
 * Reads a request's JSON body into `req.body`, in the order the checks answer:
 * - no body (no Content-Length, or 0, and not chunked): nothing to read, `req.body` stays unset;
 * - not declared as JSON: 415 (a form post from a web page, which skips the CORS preflight, can
 *   never be one);
 * - a declared length over the limit: 413 before a byte is read;
 * - a charset other than UTF-8, or any Content-Encoding: 415 (never inflated);
 * - more bytes than the limit (chunked bodies): 413 as soon as they pass it;
 * - a body that ends early (client gone): 400; malformed JSON: 400. An empty body is `{}`;
 *   any JSON value is let through (the route says what it takes).
 * express.json did this in ~10 layers of libraries; this is the same contract in one middleware
 * (npm run bench, framework cost on execute).
 */
export function jsonBodies(limit: number): RequestHandler {
  return (req, _res, next) => {
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return next();
    const type = req.headers['content-type'];
    if ((type ?? '').split(';', 1)[0]!.trim().toLowerCase() !== 'application/json')
      throw new BridgeError(415, `Content-Type must be application/json (got ${type ?? 'none'})`);
    if (length !== undefined && Number(length) > limit) throw bodyTooLarge(limit);
    const charset = parseContentType(type!).parameters['charset']?.toLowerCase() || 'utf-8';
    if (charset !== 'utf-8') throw new BridgeError(415, `Charset '${charset}' is not supported: send UTF-8 JSON`);
    const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
    if (encoding !== 'identity')
      throw new BridgeError(415, `Content-Encoding '${encoding}' is not supported: send the JSON uncompressed`);

    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (error?: BridgeError) => {
      if (settled) return;
      settled = true;
      // Whatever still comes of an oversized body is dropped: the 413 closes the connection.
      req.off('data', onData);
      next(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) settle(bodyTooLarge(limit));
      else chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => {
      if (settled) return;
      const text = Buffer.concat(chunks, size).toString('utf8');
      // A leading byte-order mark is not part of the JSON.
      const json = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
      try {
        req.body = json.length === 0 ? {} : (JSON.parse(json) as unknown);
      } catch {
        return settle(new BridgeError(400, 'Malformed JSON body: send a JSON object'));
      }
      settle();
    });
    const early = () => settle(new BridgeError(400, 'The request body ended early: the client closed the connection'));
    req.once('error', early);
    req.once('close', () => {
      if (!req.readableEnded) early();
    });
  };
}

export const bodyTooLarge = (limit: number) =>
  new BridgeError(413, `Request body is larger than ${limit} bytes (setting agentBridge.maxBodyBytes)`);
