import { BridgeError } from '../bridgeError';

/**
 * Text the editor would mangle: a UTF-16 surrogate without its pair. JSON can carry one
 * (`"\ud800"`), but VS Code's text model counts it differently from the bridge, so a later whole-
 * cell replacement lands at the wrong offsets and eats characters. Such text is refused before it
 * reaches a cell or a kernel.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const MAX_DEPTH = 64;

/** Where the first lone surrogate in `value` (any string within it) is: its path and UTF-16 index. */
export function findLoneSurrogate(value: unknown, path = '', depth = 0): { path: string; index: number } | undefined {
  if (typeof value === 'string') {
    const match = LONE_SURROGATE.exec(value);
    return match ? { path, index: match.index } : undefined;
  }
  if (!value || typeof value !== 'object' || depth > MAX_DEPTH) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = findLoneSurrogate(key, path, depth + 1) ?? findLoneSurrogate(inner, path ? `${path}.${key}` : key, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Throws a 400 naming where the first lone surrogate in `value` is. */
export function refuseLoneSurrogates(value: unknown, what = 'the request body'): void {
  const found = findLoneSurrogate(value);
  if (!found) return;
  const at = found.path ? `"${found.path}"` : what;
  throw new BridgeError(
    'bad_input',
    `${at} holds a lone UTF-16 surrogate at character ${found.index} (0-based): half of a pair, which no text can hold. ` +
      `Send the whole character (both halves, or the character itself), or remove it.`,
    { path: found.path, index: found.index },
  );
}
