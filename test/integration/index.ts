/**
 * The integration-test runner VS Code loads from `extensionTestsPath` (bundled by
 * scripts/test-integration.ts to out/integration/index.js): runs mocha inside the extension host.
 * The bundle's entry calls `runSuites` with a loader that requires every test/integration/*.test.ts,
 * so a new test file needs no change here.
 */
import Mocha from 'mocha';

/** Runs the suites that `load` registers (it must `require` the test files). Rejects on failures. */
export function runSuites(load: () => void): Promise<void> {
  const mocha = new Mocha({ ui: 'bdd', timeout: 20_000, color: false, reporter: 'spec' });
  const grep = process.env['AGENT_BRIDGE_TEST_GREP'];
  if (grep) mocha.grep(grep);
  // Define describe/it/before... on the global object, then let the test files register.
  mocha.suite.emit('pre-require', globalThis, 'integration', mocha);
  load();
  return new Promise<void>((resolve, reject) => {
    try {
      mocha.run((failures) => (failures > 0 ? reject(new Error(`${failures} integration test(s) failed`)) : resolve()));
    } catch (err) {
      reject(err instanceof Error ? err : new Error(String(err)));
    }
  });
}

/** VS Code's extensionTestsPath contract, when this file is used without the generated entry. */
export function run(): Promise<void> {
  return runSuites(() => {
    // Loaded after mocha's pre-require, so describe/it exist when the file runs.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('./extension.test');
  });
}
