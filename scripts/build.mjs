// Bundles the extension into dist/extension.js (what activation loads: settings, the socket,
// discovery) and dist/composition.js (the rest, loaded once the server listens), and ships the
// builtin kernel's Python beside them.
import { copyFileSync, mkdirSync } from 'node:fs';
import * as path from 'node:path';
import { build } from 'esbuild';

/**
 * zod re-exports its error messages in ~40 languages as `z.locales`; bundling `z` as an object
 * keeps them all, a quarter of the bundle. The bridge (and the MCP SDK) speak English only.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]v4[\\/]/.test(args.importer)
        ? { path: path.join(path.dirname(args.importer), '..', 'locales', 'en.js'), namespace: 'zod-en' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-en' }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(args.path)};`,
      resolveDir: '.',
    }));
  },
};

/** The entry loads the composition bundle at run time instead of holding a copy of it. */
const compositionApart = {
  name: 'composition-apart',
  setup(b) {
    b.onResolve({ filter: /^\.\/composition$/ }, (args) =>
      args.importer.endsWith(path.join('src', 'extension.ts')) ? { path: './composition.js', external: true } : undefined,
    );
  },
};

await build({
  entryPoints: { extension: 'src/extension.ts', composition: 'src/composition.ts' },
  bundle: true,
  outdir: 'dist',
  external: ['vscode'],
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  minify: true,
  plugins: [zodEnglishOnly, compositionApart],
  // import() of the composition bundle as a require(): the extension host loads extensions as CommonJS.
  supported: { 'dynamic-import': false },
  alias: {
    // Express's dependencies carry tables the bridge never uses (see each stand-in's comment).
    'iconv-lite': './src/server/standIns/utf8Only.ts',
    'mime-db': './src/server/standIns/mimeDb.ts',
    // Its UMD main requires its parts at run time, out of the bundle's reach; the ES build imports them.
    'jsonc-parser': './node_modules/jsonc-parser/lib/esm/main.js',
  },
  logLevel: 'warning',
});

mkdirSync('dist', { recursive: true });
copyFileSync('src/kernels/builtin/kernel.py', 'dist/kernel.py');
copyFileSync('src/kernels/builtin/kernel_protocol.py', 'dist/kernel_protocol.py'); // the wire to the host, loaded by kernel.py
copyFileSync('src/kernels/builtin/kernel_values.py', 'dist/kernel_values.py'); // rich values, loaded by kernel.py
copyFileSync('src/kernels/builtin/agent_bridge.py', 'dist/agent_bridge.py'); // code mode, imported by kernel.py
copyFileSync('src/kernels/builtin/kernel_ipython.py', 'dist/kernel_ipython.py'); // the IPython path, loaded by kernel.py
copyFileSync('src/kernels/builtin/kernel_text.py', 'dist/kernel_text.py'); // readable tables, loaded by kernel.py
copyFileSync('src/kernels/builtin/kernel_inspect.py', 'dist/kernel_inspect.py'); // variables and cell analysis, loaded by kernel.py
copyFileSync('src/kernels/risk_scan.py', 'dist/risk_scan.py'); // the risk scan, in a process of its own (riskScanner.ts)
copyFileSync('src/kernels/builtin/kernel_dataflow.py', 'dist/kernel_dataflow.py'); // what each cell run read and changed, loaded by kernel.py
