/**
 * Build-time stand-in for `iconv-lite` (esbuild alias in package.json "build"): the bridge reads
 * UTF-8 JSON only, so the charset tables — over a quarter of the bundle — stay out of it. Other
 * charsets fail the way iconv-lite fails for an unknown one, which body-parser turns into 415.
 */
import { StringDecoder } from 'node:string_decoder';

const isUtf8 = (encoding: string) => /^utf-?8$/i.test(encoding);

function requireUtf8(encoding: string): void {
  if (!isUtf8(encoding)) throw new Error(`Encoding not recognized: '${encoding}' (searched as: '${encoding.toLowerCase()}')`);
}

const stripBom = (text: string) => (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);

export function encodingExists(encoding: string): boolean {
  return isUtf8(encoding);
}

export function decode(buffer: Buffer, encoding: string): string {
  requireUtf8(encoding);
  return stripBom(buffer.toString('utf8'));
}

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
