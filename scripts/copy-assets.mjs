// Ships the builtin kernel's Python program beside the bundle (esbuild only bundles TS).
import { copyFileSync, mkdirSync } from 'node:fs';
mkdirSync('dist', { recursive: true });
copyFileSync('src/kernels/builtin/kernel.py', 'dist/kernel.py');
copyFileSync('src/kernels/builtin/agent_bridge.py', 'dist/agent_bridge.py'); // code mode, imported by kernel.py
