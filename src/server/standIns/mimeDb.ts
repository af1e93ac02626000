/**
 * Build-time stand-in for `mime-db` (esbuild alias in scripts/build.mjs). Express looks types up
 * only for what the bridge sends through it, JSON answers; the event streams and raw output items
 * set their Content-Type themselves. The full database is 150 KB that mime-types indexes at load.
 */
const db: Record<string, { charset?: string; compressible?: boolean; extensions?: string[] }> = {
  'application/json': { charset: 'UTF-8', compressible: true, extensions: ['json'] },
};
export = db;
