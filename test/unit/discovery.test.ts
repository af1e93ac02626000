import { strict as assert } from 'node:assert';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Discovery, marimoRegistryDir, marimoRegistryFileName, removeStaleEntries, type BridgeAdvert } from '../../src/discovery';
import { writeFileAtomic } from '../../src/fsAtomic';

const advert = (port: number): BridgeAdvert => ({
  server: 'agent-bridge',
  version: '0.25.2',
  bridgeVersion: '0.1.0',
  url: `http://127.0.0.1:${port}`,
  host: '127.0.0.1',
  port,
  pid: process.pid,
  token: 'secret-token',
  startedAt: '2026-11-22T00:00:00.000Z',
  sessions: [{ id: 's_abc123', path: '/w/a.ipynb', uri: 'file:///w/a.ipynb', notebookType: 'jupyter-notebook' }],
});

describe('discovery files', () => {
  let root: string;
  let discovery: Discovery;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'bridge-discovery-'));
    discovery = new Discovery([join(root, 'own', 'bridge.json')], join(root, 'state', 'marimo', 'servers'));
  });
  afterEach(() => {
    discovery.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  it('resolves the registry folder like marimo', () => {
    assert.equal(marimoRegistryDir({ XDG_STATE_HOME: '/x/state' }, 'linux'), '/x/state/marimo/servers');
    assert.match(marimoRegistryDir({ XDG_STATE_HOME: '  ' }, 'linux'), /\.local\/state\/marimo\/servers$/);
    assert.equal(marimoRegistryDir({ USERPROFILE: 'C:\\Users\\me' }, 'win32').endsWith(join('.marimo', 'servers')), true);
    assert.equal(marimoRegistryFileName('127.0.0.1', 41234), '127.0.0.1_41234.json');
  });

  it('writes the registry entry with exactly marimo keys, no token, mode 0600 in a 0700 folder', () => {
    discovery.publish(advert(41234));
    const dir = join(root, 'state', 'marimo', 'servers');
    const file = join(dir, '127.0.0.1_41234.json');
    const entry = JSON.parse(readFileSync(file, 'utf8'));
    assert.deepEqual(Object.keys(entry).sort(), ['base_url', 'host', 'pid', 'port', 'server_id', 'started_at', 'version']);
    assert.equal(entry.server_id, '127.0.0.1:41234');
    assert.equal(entry.base_url, '');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.deepEqual(readdirSync(dir), ['127.0.0.1_41234.json'], 'no temp file left behind');
  });

  it('writes our own file with the token and sessions, mode 0600', () => {
    discovery.publish(advert(41234));
    const file = join(root, 'own', 'bridge.json');
    const own = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(own.token, 'secret-token');
    assert.equal(own.sessions[0].id, 's_abc123');
    assert.equal(statSync(file).mode & 0o777, 0o600);
  });

  it('moves the registry entry when the port changes and removes everything on withdraw', () => {
    discovery.publish(advert(41234));
    discovery.publish(advert(41235));
    const dir = join(root, 'state', 'marimo', 'servers');
    assert.deepEqual(readdirSync(dir), ['127.0.0.1_41235.json']);
    discovery.withdraw();
    assert.deepEqual(readdirSync(dir), []);
    assert.equal(existsSync(join(root, 'own', 'bridge.json')), false);
  });

  it("leaves on withdraw the files another bridge has written since (a reloaded window's)", () => {
    discovery.publish(advert(41234));
    const own = join(root, 'own', 'bridge.json');
    const entry = join(root, 'state', 'marimo', 'servers', '127.0.0.1_41234.json');
    for (const file of [own, entry]) writeFileSync(file, JSON.stringify({ ...advert(41234), pid: 999_002 }));
    discovery.withdraw();
    assert.equal(existsSync(own), true);
    assert.equal(existsSync(entry), true);
  });

  it('removes at start what a dead bridge left (its file and its registry entry), nothing else', () => {
    const own = join(root, 'own');
    const registry = join(root, 'state', 'marimo', 'servers');
    const dead = { ...advert(41000), pid: 999_001 };
    const live = { ...advert(41001), pid: 999_002 };
    const entryOf = (a: BridgeAdvert) => join(registry, marimoRegistryFileName(a.host, a.port));
    for (const a of [dead, live]) {
      writeFileAtomic(join(own, `${a.pid}.json`), JSON.stringify(a));
      writeFileAtomic(entryOf(a), JSON.stringify({ pid: a.pid }));
    }
    // A marimo server that took the dead bridge's old port since: another pid, so it stays.
    const reused = { ...advert(41002), pid: 999_003 };
    writeFileAtomic(join(own, `${reused.pid}.json`), JSON.stringify(reused));
    writeFileAtomic(entryOf(reused), JSON.stringify({ pid: 4242 }));
    writeFileAtomic(join(own, 'not-ours.json'), JSON.stringify({ server: 'other', pid: 999_001 }));

    const removed = removeStaleEntries(own, registry, (pid) => pid === live.pid);
    assert.deepEqual(removed.sort(), [entryOf(dead), join(own, `${dead.pid}.json`), join(own, `${reused.pid}.json`)].sort());
    assert.equal(existsSync(entryOf(live)), true);
    assert.equal(existsSync(entryOf(reused)), true);
    assert.equal(existsSync(join(own, 'not-ours.json')), true);
    assert.deepEqual(removeStaleEntries(join(root, 'missing'), registry), []);
  });
});
