import { strict as assert } from 'node:assert';
import { build } from 'esbuild';

/**
 * What activation loads before the server listens (src/extension.ts, bundled by scripts/build.mjs
 * as dist/extension.js, with the composition left to be required at run time): no library and
 * none of the layers the first request needs only once it is answered.
 */
describe('the activation entry bundle', () => {
  it('holds the settings, the server lifecycle and discovery, and loads the rest as dist/composition.js', async () => {
    const result = await build({
      entryPoints: ['src/extension.ts'],
      bundle: true,
      write: false,
      metafile: true,
      format: 'cjs',
      platform: 'node',
      external: ['vscode'],
      plugins: [
        {
          name: 'composition-apart',
          setup: (b) => b.onResolve({ filter: /^\.\/composition$/ }, () => ({ path: './composition.js', external: true })),
        },
      ],
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).sort();
    assert.deepEqual(
      inputs.filter((f) => /node_modules|src\/(server\/(?!listen)|kernels|notebooks|mcp|access)\//.test(f)),
      [],
    );
    assert.ok(inputs.includes('src/server/listen.ts') && inputs.includes('src/discovery.ts'), inputs.join());
    const imports = Object.values(result.metafile.outputs).flatMap((o) => o.imports.map((i) => i.path));
    assert.ok(imports.includes('./composition.js'), imports.join());
  });
});
