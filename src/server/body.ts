import type { IncomingMessage } from 'node:http';
import { BridgeError } from '../core/errors';

/**
 * Reads a request's JSON body: `undefined` when it has none. Bodies must be declared as UTF-8
 * JSON (415 otherwise): a form post from a web page, which skips the CORS preflight, can never
 * be one. Over `limit` bytes is a 413, decided from Content-Length before a byte is read when the
 * client declared it; anything but a JSON object or array is a 400.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return undefined;
  checkContentType(req.headers['content-type']);
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity')
    throw new BridgeError(415, `Content-Encoding '${encoding}' is not supported: send the JSON uncompressed`);
  if (length !== undefined && Number(length) > limit) throw tooLarge(limit);

  let text = (await readBytes(req, limit)).toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (!text.trim()) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BridgeError(400, 'Malformed JSON body: send a JSON object');
  }
  if (typeof value !== 'object' || value === null) throw new BridgeError(400, 'The JSON body must be an object');
  return value;
}

/**
 * The body's bytes, up to `limit`. Past it, reading stops at once (the 413 then closes the
 * connection rather than draining an unbounded body).
 */
function readBytes(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (error?: Error) => {
      req.off('data', onData).off('end', onEnd).off('error', cut).off('close', cut);
      if (error) {
        req.pause();
        reject(error);
      } else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) settle(tooLarge(limit));
      else chunks.push(chunk);
    };
    const onEnd = () => settle();
    // The client is gone: the answer reaches nobody, but it must not count as the bridge's fault.
    const cut = () => settle(new BridgeError(400, 'The request body ended early: the client closed the connection'));
    req.on('data', onData).on('end', onEnd).on('error', cut).on('close', cut);
  });
}

/** `application/json`, with no charset or a UTF-8 one. */
function checkContentType(header: string | undefined): void {
  const [type = '', ...params] = (header ?? '').split(';');
  if (type.trim().toLowerCase() !== 'application/json')
    throw new BridgeError(415, `Content-Type must be application/json (got ${header ?? 'none'})`);
  for (const param of params) {
    const [name = '', value = ''] = param.split('=');
    const charset = value.trim().replace(/^"(.*)"$/, '$1');
    if (name.trim().toLowerCase() === 'charset' && !/^utf-?8$/i.test(charset))
      throw new BridgeError(415, `Charset '${charset}' is not supported: send UTF-8 JSON`);
  }
}

const tooLarge = (limit: number) =>
  new BridgeError(413, `Request body is larger than ${limit} bytes (setting agentBridge.maxBodyBytes)`);
