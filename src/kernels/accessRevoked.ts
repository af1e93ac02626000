import type { ApiKernel } from './extensionApi';

/** The name of the error the Jupyter extension throws while access is refused (stable, per its source). */
export const ACCESS_REVOKED = 'vscode.jupyter.apiAccessRevoked';

export function isAccessRevoked(error: unknown): boolean {
  return error instanceof Error && error.name === ACCESS_REVOKED;
}

/**
 * The kernel with its code watched for a refusal that comes with it: the person can take access
 * away ("Jupyter: Manage Access To Jupyter Kernels") after allowing it, and the bridge only learns
 * so when code is refused. `revoked` records that and gives the error to throw instead.
 */
export function watchRevocation(kernel: ApiKernel, revoked: () => Error): ApiKernel {
  return {
    async *executeCode(code, token) {
      try {
        yield* kernel.executeCode(code, token);
      } catch (error) {
        throw isAccessRevoked(error) ? revoked() : error;
      }
    },
  };
}
