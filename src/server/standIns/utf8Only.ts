/**
 * Build-time stand-in for `iconv-lite` (esbuild alias in scripts/build.mjs): the bridge reads
 * UTF-8 JSON only, so the charset tables, a third of the bundle, stay out of it. body-parser
 * refuses other charsets with a 415 before it decodes; this fails the same way if one gets by.
 */
import { StringDecoder } from 'node:string_decoder';

const isUtf8 = (encoding: string) => /^utf-?8$/i.test(encoding);

function requireUtf8(encoding: string): void {
  if (!isUtf8(encoding)) throw new Error(`Encoding not recognized: '${encoding}'`);
}

const stripBom = (text: string) => (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);

export function encodingExists(encoding: string): boolean {
  return isUtf8(encoding);
}

export function decode(buffer: Buffer, encoding: string): string {
  requireUtf8(encoding);
  return stripBom(buffer.toString('utf8'));
}

/** A streaming decoder that drops a leading byte-order mark, as iconv-lite's does. */
export function getDecoder(encoding: string): { write(chunk: Buffer): string; end(): string | undefined } {
  requireUtf8(encoding);
  const decoder = new StringDecoder('utf8');
  let first = true;
  return {
    write(chunk) {
      const text = decoder.write(chunk);
      if (first && text) {
        first = false;
        return stripBom(text);
      }
      return text;
    },
    end: () => decoder.end() || undefined,
  };
}
