import { KernelProcess } from './src/kernels/builtin/kernelProcess';
const SCRIPT = __dirname + '/src/kernels/builtin/kernel.py';
async function measure(label: string, python: string, env: NodeJS.ProcessEnv, mode: 'cell' | 'scratchpad') {
  const k = new KernelProcess({ python, script: SCRIPT, env });
  await k.start();
  const t: number[] = [];
  for (let i = 0; i < 600; i++) {
    const s = process.hrtime.bigint();
    await k.run('print(1)', mode, () => undefined);
    t.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const w = t.slice(100).sort((a, b) => a - b);
  console.log(`${label} ${mode}: p50 ${w[Math.floor(w.length / 2)]!.toFixed(3)} ms  p90 ${w[Math.floor(w.length * 0.9)]!.toFixed(3)} ms`);
  k.dispose();
}
(async () => {
  for (const mode of ['cell', 'scratchpad'] as const) {
    await measure('plain  /usr/bin/python3', '/usr/bin/python3', { ...process.env, AGENT_BRIDGE_IPYTHON: '0' }, mode);
    await measure('ipython /usr/bin/python3', '/usr/bin/python3', process.env, mode);
  }
})();
