/**
 * `npm run sandbox-down [-- ID]`: stops the sandbox `npm run sandbox-up` started (the newest one,
 * or ID), by its record in .vscode-test/sandboxes/: asks its launcher to shut down, and kills the
 * recorded processes only if that does not finish in time.
 */
import { parseArgs } from 'node:util';
import { listRecords, readRecord, stopRecorded } from '../sandbox-test/vscode';
import { runMain } from './runMain';

async function main(): Promise<number> {
  const id = parseArgs({ allowPositionals: true }).positionals[0];
  const record = id
    ? readRecord(id)
    : listRecords()
        .filter((r) => r.kind === 'up')
        .pop();
  if (!record) {
    process.stderr.write(id ? `no sandbox recorded as ${id}\n` : 'no sandbox started by sandbox-up is recorded\n');
    return id ? 1 : 0;
  }
  process.stdout.write(`${await stopRecorded(record)}\n`);
  return 0;
}

runMain(main);
