import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type * as vscode from 'vscode';

/** Where Jupyter looks for kernelspecs (`jupyter --paths`, data dirs), per platform. */
function kernelSpecDirs(): string[] {
  const home = os.homedir();
  const fromEnv = (process.env['JUPYTER_PATH'] ?? '').split(path.delimiter).filter(Boolean);
  const user =
    process.platform === 'darwin'
      ? path.join(home, 'Library', 'Jupyter')
      : process.platform === 'win32'
        ? path.join(process.env['APPDATA'] ?? home, 'jupyter')
        : path.join(process.env['XDG_DATA_HOME'] || path.join(home, '.local', 'share'), 'jupyter');
  const system =
    process.platform === 'win32'
      ? [path.join(process.env['PROGRAMDATA'] ?? 'C:\\ProgramData', 'jupyter')]
      : ['/usr/local/share/jupyter', '/usr/share/jupyter'];
  return [...fromEnv, user, ...system].map((dir) => path.join(dir, 'kernels'));
}

export function kernelSpecName(notebook: vscode.NotebookDocument): string {
  const meta = notebook.metadata as { metadata?: { kernelspec?: { name?: unknown } }; kernelspec?: { name?: unknown } };
  const name = (meta.metadata ?? meta).kernelspec?.name;
  return typeof name === 'string' && name ? name : 'python3';
}

interface KernelSpecFile {
  argv?: unknown;
}

/**
 * The Jupyter extension's controller id for a kernelspec found on disk (no Python extension
 * involved): `.<name>.<argv[0]>..<argv[1:] without -f/{connection_file}, '#'-joined, lower case>`.
 * This mirrors the extension's getKernelId; it is how `notebook.selectKernel` names its controller.
 */
export function kernelSpecControllerId(name: string, argv: readonly string[]): string {
  const args = argv
    .slice(1)
    .filter((a) => a !== '-f' && a !== '{connection_file}')
    .join('#')
    .toLowerCase();
  return `.${name}.${argv[0] ?? ''}..${args}`;
}

/** Controller ids for the kernelspec the notebook's metadata names, first match first. */
export function findKernelSpecControllerIds(notebook: vscode.NotebookDocument): string[] {
  const name = kernelSpecName(notebook);
  const ids: string[] = [];
  for (const dir of kernelSpecDirs()) {
    let spec: KernelSpecFile;
    try {
      spec = JSON.parse(fs.readFileSync(path.join(dir, name, 'kernel.json'), 'utf8')) as KernelSpecFile;
    } catch {
      continue;
    }
    if (Array.isArray(spec.argv) && spec.argv.every((a) => typeof a === 'string')) {
      const id = kernelSpecControllerId(name, spec.argv as string[]);
      if (!ids.includes(id)) ids.push(id);
    }
  }
  return ids;
}
