/**
 * Idle memory for the peers table: PSS over process trees, read from /proc. A peer's figure is
 * its whole server's tree. The bridge lives in VS Code's extension host, beside VS Code's own
 * code and other extensions, so its figure is split: the extension host process with one
 * kernel's tree (what an agent's work on that kernel holds), against the extension host of the
 * same sandbox without our extension.
 */
import * as fs from 'node:fs';

export interface Memory {
  pss: number;
  rss: number;
}

/** What a direct child of the extension host runs, from its whole tree's command lines. */
export type KernelKind = 'builtin' | 'jupyter' | 'marimo' | 'other';

function safeRead(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return ''; // the process ended meanwhile
  }
}

/** Each live process's parent. */
function parents(): Map<number, number> {
  const parent = new Map<number, number>();
  for (const d of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    const stat = safeRead(`/proc/${d}/stat`);
    const m = /\) \S (\d+)/.exec(stat.slice(stat.lastIndexOf(')')));
    if (m) parent.set(Number(d), Number(m[1]));
  }
  return parent;
}

/** `roots` and all their descendants. */
function tree(roots: readonly number[], parent = parents()): Set<number> {
  const all = new Set(roots);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parent) {
      if (!all.has(ppid) || all.has(pid)) continue;
      all.add(pid);
      grew = true;
    }
  }
  return all;
}

/** PSS and RSS summed over `pids`, MB. */
function sum(pids: Iterable<number>): Memory {
  let [pss, rss] = [0, 0];
  for (const pid of pids) {
    const r = safeRead(`/proc/${pid}/smaps_rollup`);
    pss += Number(/^Pss:\s+(\d+) kB/m.exec(r)?.[1] ?? 0) / 1024;
    rss += Number(/^Rss:\s+(\d+) kB/m.exec(r)?.[1] ?? 0) / 1024;
  }
  return { pss, rss };
}

/** PSS and RSS of processes and all their descendants, MB. */
export function treeMemory(roots: readonly number[]): Memory {
  return sum(tree(roots));
}

/** The extension host process alone, without its children, MB. */
export function processMemory(pid: number): Memory {
  return sum([pid]);
}

/**
 * The trees under the extension host `pid`, by what they run: our builtin kernel (kernel.py,
 * bare or in its bwrap sandbox), an ipykernel the Jupyter extension started, marimo's language
 * server with its kernels, or something else (another extension's helper, the fake kernel).
 */
export function kernelTrees(pid: number): Record<KernelKind, Memory> {
  const parent = parents();
  const out: Record<KernelKind, Memory> = {
    builtin: { pss: 0, rss: 0 },
    jupyter: { pss: 0, rss: 0 },
    marimo: { pss: 0, rss: 0 },
    other: { pss: 0, rss: 0 },
  };
  for (const [child, ppid] of parent) {
    if (ppid !== pid) continue;
    const pids = tree([child], parent);
    const cmdlines = [...pids].map((p) => safeRead(`/proc/${p}/cmdline`).replace(/\0/g, ' ')).join('\n');
    const kind: KernelKind = /\bkernel\.py\b/.test(cmdlines)
      ? 'builtin'
      : /ipykernel/.test(cmdlines)
        ? 'jupyter'
        : /marimo/.test(cmdlines)
          ? 'marimo'
          : 'other';
    const m = sum(pids);
    out[kind] = { pss: out[kind].pss + m.pss, rss: out[kind].rss + m.rss };
  }
  return out;
}
