/**
 * `npm run sandbox-cleanup [-- --all]`: stops every leftover sandbox recorded under
 * .vscode-test/sandboxes/ and removes its record, run folder and logs. Only recorded sandboxes are
 * touched, and only their own processes (recorded pids checked against their start times,
 * recorded process groups, processes carrying the sandbox's marker variable).
 *
 * A sandbox whose owning process still runs (a harness or test run in progress) is left alone
 * unless --all is given; sandboxes started by sandbox-up are always stopped.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { listRecords, ownerRunning, STACK, stopRecorded } from '../sandbox-test/vscode';
import { runMain } from './runMain';

async function main(): Promise<number> {
  const { all } = parseArgs({ options: { all: { type: 'boolean', default: false } } }).values;
  const records = listRecords();
  let stopped = 0;
  for (const record of records) {
    if (!all && record.kind !== 'up' && ownerRunning(record)) {
      process.stdout.write(
        `left ${record.id} alone: its ${record.kind} run (pid ${record.launcherPid}) is still going; use --all to stop it too\n`,
      );
      continue;
    }
    process.stdout.write(`${await stopRecorded(record)}\n`);
    stopped++;
  }
  // Launcher logs whose sandbox record is gone (the launcher died before writing one).
  const ids = new Set(listRecords().map((r) => r.id));
  for (const name of fs.existsSync(STACK.recordsDir) ? fs.readdirSync(STACK.recordsDir) : []) {
    const m = /^(.+)\.(log|json\.\d+\.tmp)$/.exec(name);
    if (m && !ids.has(m[1]!)) fs.rmSync(path.join(STACK.recordsDir, name), { force: true });
  }
  process.stdout.write(
    records.length ? `${stopped} of ${records.length} recorded sandboxes stopped\n` : 'no sandboxes recorded\n',
  );
  return 0;
}

runMain(main);
