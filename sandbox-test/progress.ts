/**
 * The one shape of the progress lines the harness and the scripts write on stderr:
 * `[<tag> <seconds since the writer was made> s] <message>`, so interleaved lines of the
 * harness, its sandboxes and the scripts read alike.
 */
export function progressLog(tag: string): (message: string) => void {
  const start = Date.now();
  return (message) => process.stderr.write(`[${tag} ${((Date.now() - start) / 1000).toFixed(1)} s] ${message}\n`);
}
