import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { deflateRawSync } from 'node:zlib';
import { findExtension, givenExtensions, readVsix } from '../../sandbox-test/extensions';

/** A minimal zip (what vsce writes: local headers, central directory, end record). */
function zip(files: Record<string, string>, deflate: boolean): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, text] of Object.entries(files)) {
    const raw = Buffer.from(text);
    const data = deflate ? deflateRawSync(raw) : raw;
    const nameBuf = Buffer.from(name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(deflate ? 8 : 0, 8);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(raw.length, 22);
    local.writeUInt16LE(nameBuf.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(deflate ? 8 : 0, 10);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(raw.length, 24);
    central.writeUInt16LE(nameBuf.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBuf, data);
    centrals.push(central, nameBuf);
    offset += 30 + nameBuf.length + data.length;
  }
  const dir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(Object.keys(files).length, 8);
  end.writeUInt16LE(Object.keys(files).length, 10);
  end.writeUInt32LE(dir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, dir, end]);
}

describe('other extensions given by path (sandbox-test/extensions.ts)', () => {
  let dir: string;
  const write = (name: string, pkg: object, deflate = true) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, zip({ '[Content_Types].xml': '<x/>', 'extension/package.json': JSON.stringify(pkg) }, deflate));
    return file;
  };
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ab-ext-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  afterEach(() => delete process.env['SANDBOX_EXTENSIONS']);

  it('reads the id, version and dependencies from a .vsix, stored or deflated', () => {
    for (const deflate of [true, false]) {
      const file = write(
        `m-${deflate}.vsix`,
        {
          publisher: 'Marimo-Team',
          name: 'vscode-marimo',
          version: '0.17.1',
          extensionDependencies: ['ms-python.python'],
        },
        deflate,
      );
      assert.deepEqual(readVsix(file), {
        vsix: file,
        id: 'marimo-team.vscode-marimo',
        version: '0.17.1',
        dependencies: ['ms-python.python'],
      });
    }
  });

  it('refuses a file that is not a .vsix, and one that does not exist', () => {
    const bogus = path.join(dir, 'bogus.vsix');
    fs.writeFileSync(bogus, 'not a zip');
    assert.throws(() => readVsix(bogus), /not a zip archive/);
    fs.writeFileSync(bogus, zip({ 'readme.md': 'hi' }, false));
    assert.throws(() => readVsix(bogus), /without extension\/package\.json/);
    assert.throws(() => readVsix(path.join(dir, 'missing.vsix')), /does not exist/);
  });

  it('takes SANDBOX_EXTENSIONS and flags; a needed extension is found, or skipped with the variable to set', () => {
    const jupyter = write('j.vsix', { publisher: 'ms-toolsai', name: 'jupyter', version: '2025.9.0' });
    const marimo = write('m.vsix', {
      publisher: 'marimo-team',
      name: 'vscode-marimo',
      version: '0.17.1',
      extensionDependencies: ['ms-python.python'],
    });
    process.env['SANDBOX_EXTENSIONS'] = `${jupyter}:`;
    const given = givenExtensions([marimo]);
    assert.deepEqual(
      given.map((e) => e.id),
      ['ms-toolsai.jupyter', 'marimo-team.vscode-marimo'],
    );
    const found = findExtension(given, 'ms-toolsai.jupyter');
    assert.ok('extension' in found && found.extension.vsix === jupyter);
    const needsPython = findExtension(given, 'marimo-team.vscode-marimo');
    assert.ok('skip' in needsPython && /ms-python\.python/.test(needsPython.skip), JSON.stringify(needsPython));
    const absent = findExtension([], 'ms-toolsai.jupyter');
    assert.ok('skip' in absent && /SANDBOX_EXTENSIONS=/.test(absent.skip), JSON.stringify(absent));
  });
});
