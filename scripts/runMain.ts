/** Runs a command-line entry point and exits with its code; a failure prints its message, not a stack. */
import { errorMessage } from '../src/core/errorMessage';
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${errorMessage(err)}\n`);
      process.exit(1);
    },
  );
}
