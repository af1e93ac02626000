/**
 * Other extensions the sandbox installs beside ours, given by path as .vsix files the person
 * already has (from the Marketplace, or built by hand outside this repository):
 * `SANDBOX_EXTENSIONS=/path/a.vsix:/path/b.vsix`, plus any `--extension FILE` flags. Each is
 * known by the id and version in its own package.json, read from the .vsix before launch, so a
 * suite can tell at load time whether the extension it needs is there.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { REPO_ROOT } from './stack';

export const EXTENSIONS_VAR = 'SANDBOX_EXTENSIONS';
/** The real Jupyter extension; the harness's Jupyter checks and the bench's Jupyter row need it. */
export const JUPYTER_ID = 'ms-toolsai.jupyter';

export interface GivenExtension {
  vsix: string;
  /** `publisher.name`, as VS Code knows it. */
  id: string;
  version: string;
  /** The extensions it declares it needs (`extensionDependencies`). */
  dependencies: string[];
}

/** One file's bytes from a zip archive (a .vsix), or undefined when it holds no such file. */
function readZipEntry(zip: Buffer, name: string): Buffer | undefined {
  // The end-of-central-directory record sits in the last 64 KB + 22 bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--)
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd < 0) throw new Error('not a zip archive (no end of central directory)');
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = zip.readUInt16LE(at + 10);
    const size = zip.readUInt32LE(at + 20);
    const nameLen = zip.readUInt16LE(at + 28);
    const extraLen = zip.readUInt16LE(at + 30);
    const commentLen = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    if (zip.toString('utf8', at + 46, at + 46 + nameLen) === name) {
      const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(start, start + size);
      if (method === 0) return data;
      if (method === 8) return inflateRawSync(data);
      throw new Error(`${name}: unsupported zip compression method ${method}`);
    }
    at += 46 + nameLen + extraLen + commentLen;
  }
  return undefined;
}

/** The id, version and dependencies a .vsix declares in its `extension/package.json`. */
export function readVsix(file: string): GivenExtension {
  const vsix = path.resolve(file);
  if (!fs.existsSync(vsix)) throw new Error(`${EXTENSIONS_VAR}: ${vsix} does not exist`);
  const manifest = readZipEntry(fs.readFileSync(vsix), 'extension/package.json');
  if (!manifest) throw new Error(`${vsix} is not a VS Code extension (.vsix without extension/package.json)`);
  const pkg = JSON.parse(manifest.toString('utf8')) as {
    publisher?: string;
    name?: string;
    version?: string;
    extensionDependencies?: string[];
  };
  if (!pkg.publisher || !pkg.name) throw new Error(`${vsix}: its package.json names no publisher or name`);
  return {
    vsix,
    id: `${pkg.publisher}.${pkg.name}`.toLowerCase(),
    version: pkg.version ?? '?',
    dependencies: (pkg.extensionDependencies ?? []).map((d) => d.toLowerCase()),
  };
}

/** The extensions given by SANDBOX_EXTENSIONS and `--extension` flags, in that order, once each. */
export function givenExtensions(flags: readonly string[] = []): GivenExtension[] {
  const files = [...(process.env[EXTENSIONS_VAR] ?? '').split(path.delimiter), ...flags].filter((f) => f.trim());
  const byId = new Map<string, GivenExtension>();
  for (const file of files) {
    const ext = readVsix(file.trim());
    byId.set(ext.id, ext);
  }
  return [...byId.values()];
}

export type Needed = { extension: GivenExtension } | { skip: string };

/**
 * The given extension with this id, or why the checks that need it are skipped (naming the
 * variable to set). Its own `extensionDependencies` must be given too: VS Code does not activate
 * an extension whose dependencies are missing.
 */
export function findExtension(given: readonly GivenExtension[], id: string): Needed {
  const extension = given.find((e) => e.id === id.toLowerCase());
  if (!extension) return { skip: `${id} is not among ${EXTENSIONS_VAR} (set ${EXTENSIONS_VAR}=/path/to/${id}.vsix)` };
  const missing = extension.dependencies.filter((d) => !given.some((e) => e.id === d));
  if (missing.length) return { skip: `${id} needs ${missing.join(', ')}, which ${EXTENSIONS_VAR} does not give (add its .vsix)` };
  return { extension };
}

/** One line per given extension, for the run's log. */
export function describeExtensions(given: readonly GivenExtension[]): string {
  return given.length ? given.map((e) => `${e.id} ${e.version} (${e.vsix})`).join('; ') : `none (${EXTENSIONS_VAR} is not set)`;
}

/** Packs the extension in `folder` (a test fixture: no dependencies) as `<dir>/<name>.vsix`, with vsce under setup's Node 24. */
export function packFixture(folder: string, dir: string, name: string): string {
  const vsix = path.join(dir, `${name}.vsix`);
  const args = ['package', '--no-dependencies', '--skip-license', '--allow-missing-repository', '-o', vsix];
  const r = spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'vsce.sh'), ...args], { cwd: folder, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`packing ${folder} failed (status ${r.status}): ${r.stdout}${r.stderr}`);
  return vsix;
}
