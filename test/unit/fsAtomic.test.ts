import { strict as assert } from 'node:assert';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from '../../src/fsAtomic';

describe('atomic file writes', () => {
  let root: string;
  beforeEach(() => (root = mkdtempSync(join(tmpdir(), 'bridge-atomic-'))));
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes mode 0600 into a folder it makes 0700, and leaves no temporary file', () => {
    const file = join(root, 'made', 'bridge.json');
    writeFileAtomic(file, 'one');
    writeFileAtomic(file, 'two');
    assert.equal(readFileSync(file, 'utf8'), 'two');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(join(root, 'made')).mode & 0o777, 0o700);
    assert.deepEqual(readdirSync(join(root, 'made')), ['bridge.json']);
  });

  it('never writes through a link planted where a temporary file could be, nor through the target', () => {
    const victim = join(root, 'victim');
    writeFileSync(victim, 'untouched');
    const file = join(root, 'bridge.json');
    // Every temporary name a fixed scheme could use (this process's pid and others), pointing at the victim.
    for (const pid of [process.pid, process.pid + 1, 1]) symlinkSync(victim, `${file}.${pid}.tmp`);
    symlinkSync(victim, file);
    writeFileAtomic(file, 'secret');
    assert.equal(readFileSync(victim, 'utf8'), 'untouched', 'the file a link points at is left as it was');
    assert.equal(lstatSync(file).isSymbolicLink(), false, 'the target is a file of its own now');
    assert.equal(readFileSync(file, 'utf8'), 'secret');
    assert.equal(statSync(file).mode & 0o777, 0o600);
  });
});
