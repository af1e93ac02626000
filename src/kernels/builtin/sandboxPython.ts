/**
 * The interpreter a sandboxed kernel runs and the folders it reads, found without running anything
 * outside the sandbox: the name is looked up on PATH, symlinks followed, and a virtualenv known by
 * its pyvenv.cfg. Every Unix Python lives as `<prefix>/bin/python…`, so its prefix is two folders
 * up from the file; a virtualenv adds its own folder to the base interpreter's. Only a launcher
 * script (a pyenv shim) must be asked which interpreter it starts: that question runs in a
 * read-only sandbox (kernelSandbox.ts), with `-I -S` so that nothing from a site-packages folder
 * runs, and its answer is taken only if it names a real interpreter.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface SandboxPython {
  /** What to run: a virtualenv's `bin/python` as given (Python finds the virtualenv from it), else the interpreter itself. */
  executable: string;
  /** The installation folders it reads: the virtualenv's, and the base interpreter's prefix. */
  prefixes: string[];
}

/** Asks a launcher script, in a read-only sandbox, which interpreter it starts; undefined when it did not say. */
export type LauncherProbe = (launcher: string) => string | undefined;

const inside = (dir: string, parent: string) => dir === parent || dir.startsWith(parent.endsWith('/') ? parent : `${parent}/`);

/** The path with its symlinks resolved (bubblewrap mounts real folders); as given when it does not exist. */
export function real(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** A compiled program rather than a script: its first bytes are ELF's magic. */
function isElf(file: string): boolean {
  let fd: number | undefined;
  try {
    fd = fs.openSync(file, 'r');
    const head = Buffer.alloc(4);
    return fs.readSync(fd, head, 0, 4, 0) === 4 && head.toString('latin1') === '\x7fELF';
  } catch {
    return false;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** `python` as a file: a path as it is, a bare name from PATH. */
function which(python: string, searchPath: string): string | undefined {
  if (python.includes('/')) return isExecutableFile(python) ? path.resolve(python) : undefined;
  for (const dir of searchPath.split(path.delimiter).filter((d) => path.isAbsolute(d))) {
    const file = path.join(dir, python);
    if (isExecutableFile(file)) return file;
  }
  return undefined;
}

/** The `home` of a pyvenv.cfg: the folder of the interpreter the virtualenv was made from. */
function venvHome(cfg: string): string | undefined {
  const line = fs
    .readFileSync(cfg, 'utf8')
    .split('\n')
    .find((l) => /^\s*home\s*=/.test(l));
  const home = line?.slice(line.indexOf('=') + 1).trim();
  return home && path.isAbsolute(home) ? home : undefined;
}

/**
 * The interpreter behind `python` and its folders. `writable`: the folders the sandbox writes; a
 * pyvenv.cfg inside them is not trusted to name another folder (the sandbox may have written it).
 */
export function findPython(
  python: string,
  searchPath: string,
  writable: readonly string[],
  probe: LauncherProbe,
): SandboxPython | { error: string } {
  const file = which(python, searchPath);
  if (!file) return { error: `the kernel's Python "${python}" was not found${python.includes('/') ? '' : ' on PATH'}` };
  let executable = file;
  if (!isElf(real(file))) {
    // A launcher (pyenv's shims are shell scripts): its answer is checked, never echoed.
    const said = probe(file);
    if (!said || !path.isAbsolute(said) || !isExecutableFile(said) || !isElf(real(said)))
      return {
        error:
          `the kernel's Python "${python}" is a launcher script (${file}), and it did not name an interpreter when asked in a read-only sandbox: ` +
          'set agentBridge.pythonPath to the interpreter itself (with pyenv: the output of `pyenv which python3`)',
      };
    executable = said;
  }
  const prefixes = [path.dirname(path.dirname(real(executable)))];
  const venv = path.dirname(path.dirname(executable));
  const cfg = path.join(venv, 'pyvenv.cfg');
  if (fs.existsSync(cfg)) {
    prefixes.push(real(venv));
    // A virtualenv made with --copies finds its standard library through `home`.
    const home = !writable.some((w) => inside(real(cfg), w)) ? venvHome(cfg) : undefined;
    if (home) prefixes.push(path.dirname(real(home)));
  }
  return { executable, prefixes: [...new Set(prefixes)] };
}
