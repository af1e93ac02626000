import { z } from 'zod';

/** The kernels the bridge can select and start for a notebook. */
export const kernelChoice = z.enum(['builtin', 'jupyter', 'marimo'], {
  error: '"kernel" must be "builtin", "jupyter" or "marimo"',
});

/** `POST /notebooks/kernel/start` and the MCP `start_kernel` tool. */
export const startKernelBody = z.strictObject({
  notebook: z.string().min(1, 'give the session id or the absolute path of the notebook'),
  kernel: kernelChoice,
});
