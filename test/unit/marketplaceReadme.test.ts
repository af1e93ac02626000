/**
 * The Marketplace page (README.marketplace.md, the .vsix's README) shows its pictures: every image
 * it names exists, is packed into the .vsix by .vscodeignore's rules (as vsce applies them), stays
 * small enough for the page, and resolves through the image address the package script gives vsce,
 * which must sit under the repository's address (vsce rewrites relative images onto it).
 */
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';

const ROOT = path.join(__dirname, '..', '..');
const README = 'README.marketplace.md';
/** The page's column is under 1,000 px wide; a picture larger than this is slow to show and to install. */
const MAX_IMAGE_BYTES = 300 * 1024;

/** The images a Markdown text shows: `![alt](src)` and `<img src="...">`. */
function imageSources(markdown: string): string[] {
  const md = [...markdown.matchAll(/!\[[^\]]*\]\(\s*([^)\s]+)[^)]*\)/g)].map((m) => m[1]!);
  const html = [...markdown.matchAll(/<img\b[^>]*\bsrc=["']([^"']+)["']/gi)].map((m) => m[1]!);
  return [...md, ...html];
}

/** A .vscodeignore glob as a regular expression, with minimatch's `dot: true` (the patterns this repository uses). */
function globRegExp(glob: string): RegExp {
  if (/[[\]{}()?+@]/.test(glob)) throw new Error(`.vscodeignore pattern ${glob} uses glob syntax this check does not read`);
  let re = '';
  for (let i = 0; i < glob.length;) {
    if (glob.startsWith('**/', i)) [re, i] = [`${re}(?:.*/)?`, i + 3];
    else if (glob.startsWith('/**', i) && i + 3 === glob.length) [re, i] = [`${re}(?:/.*)?`, i + 3];
    else if (glob.startsWith('**', i)) [re, i] = [`${re}.*`, i + 2];
    else if (glob[i] === '*') [re, i] = [`${re}[^/]*`, i + 1];
    else [re, i] = [re + glob[i]!.replace(/[.^$|\\]/, '\\$&'), i + 1];
  }
  return new RegExp(`^${re}$`);
}

/**
 * Whether vsce packs `file` (relative, with /) under these .vscodeignore lines: it is left out when
 * any plain pattern matches and no `!` pattern does; a pattern naming a folder covers its files.
 */
function packed(file: string, ignoreLines: readonly string[]): boolean {
  const lines = ignoreLines.map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const folders = lines.filter((l) => !/(^|\/)[^/]*\*[^/]*$/.test(l)).map((l) => (l.endsWith('/') ? `${l}**` : `${l}/**`));
  const all = [...lines, ...folders];
  const ignore = all.filter((l) => !l.startsWith('!')).map(globRegExp);
  const negate = all.filter((l) => l.startsWith('!')).map((l) => globRegExp(l.slice(1)));
  return !ignore.some((r) => r.test(file)) || negate.some((r) => r.test(file));
}

describe('the Marketplace page shows its pictures', () => {
  const sources = imageSources(fs.readFileSync(path.join(ROOT, README), 'utf8'));
  const ignoreLines = fs.readFileSync(path.join(ROOT, '.vscodeignore'), 'utf8').split(/\r?\n/);

  it('finds the images written either way, and reads .vscodeignore as vsce does', () => {
    assert.deepEqual(imageSources('![a](x/a.png "t") and <img alt="b" src="y/b.png">'), ['x/a.png', 'y/b.png']);
    assert.equal(packed('media/screenshots/a.png', ['**', '!media/screenshots/**']), true);
    assert.equal(packed('media/other/a.png', ['**', '!media/screenshots/**']), false);
    assert.equal(packed('media/a.png', ['**', '!media/a.png']), true);
    assert.equal(packed('media/b/c.png', ['**', '!media']), true, 'a folder pattern covers its files');
    assert.equal(packed('.hidden/a.png', ['**']), false, 'dot files match as with dot: true');
  });

  it(`${README} shows at least one picture, each a file of the repository`, () => {
    assert.ok(sources.length > 0, `${README} shows no picture`);
    for (const src of sources) {
      assert.ok(!/^[a-z]+:/i.test(src), `${src}: name the file by its path in the repository (vsce makes the address)`);
      assert.ok(fs.existsSync(path.join(ROOT, src)), `${src} does not exist`);
    }
  });

  it('every picture it shows is packed into the .vsix by .vscodeignore', () => {
    const left = sources.filter((src) => !packed(path.posix.normalize(src), ignoreLines));
    assert.deepEqual(left, [], 'pictures .vscodeignore leaves out of the .vsix');
  });

  it(`every picture it shows is under ${MAX_IMAGE_BYTES / 1024} KB`, () => {
    const large = sources
      .map((src) => ({ src, bytes: fs.statSync(path.join(ROOT, src)).size }))
      .filter((f) => f.bytes >= MAX_IMAGE_BYTES);
    assert.deepEqual(large, [], 'pictures too large for the page');
  });

  it("the package script gives vsce an image address under the repository's, for the README it packs", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      repository: { url: string };
      scripts: Record<string, string>;
    };
    const script = pkg.scripts['package']!;
    assert.match(script, new RegExp(`--readme-path ${README.replace('.', '\\.')}\\b`));
    const base = /--baseImagesUrl (\S+)/.exec(script)?.[1];
    assert.ok(base, `the package script gives vsce no --baseImagesUrl: vsce refuses a relative image without one (${script})`);
    assert.ok(base.startsWith('https://'), `${base}: the Marketplace shows images from https only`);
    const repository = pkg.repository.url.replace(/\.git$/, '');
    assert.ok(base.startsWith(`${repository}/`), `${base} is not under the repository's address ${repository}`);
  });
});
