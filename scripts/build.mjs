// Bundles the extension into dist/extension.js and ships the builtin kernel's Python beside it.
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

await build({
  entryPoints: ['src/extension.ts'],
  bundle: true,
  outfile: 'dist/extension.js',
  external: ['vscode'],
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  minify: true,
  plugins: [zodEnglishOnly],
  logLevel: 'warning',
});

mkdirSync('dist', { recursive: true });
copyFileSync('src/kernels/builtin/kernel.py', 'dist/kernel.py');
copyFileSync('src/kernels/builtin/agent_bridge.py', 'dist/agent_bridge.py'); // code mode, imported by kernel.py
copyFileSync('src/kernels/builtin/kernel_ipython.py', 'dist/kernel_ipython.py'); // the IPython path, loaded by kernel.py
copyFileSync('src/kernels/builtin/kernel_text.py', 'dist/kernel_text.py'); // readable tables, loaded by kernel.py
