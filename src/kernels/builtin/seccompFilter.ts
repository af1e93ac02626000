/**
 * The seccomp program the sandboxed kernel runs under (bubblewrap loads it with `--seccomp FD`):
 * a classic BPF filter, made here rather than shipped as a binary, that refuses with EPERM
 *   - socket(AF_UNIX, ...): no Unix socket can be made, so none the host opened (VS Code's IPC,
 *     D-Bus, an agent's) can be connected to, wherever its file lies; socketpair() stays allowed
 *     (asyncio's self-pipe), and so do the kernel's own pipes, which exist before the filter;
 *   - io_uring_setup: io_uring makes sockets without the socket() syscall;
 *   - add_key, request_key, keyctl: the kernel keyrings are not namespaced like the rest;
 * and kills a process that calls through another ABI (i386 or x32 on x86-64), where the numbers
 * above mean other calls. Everything else is allowed: the namespaces and mounts do the rest.
 */

interface Arch {
  /** AUDIT_ARCH_* of linux/audit.h. */
  audit: number;
  socket: number;
  denied: readonly number[];
  /** x86-64's x32 ABI sets this bit in the syscall number. */
  x32Bit?: number;
}

/** Syscall numbers: asm/unistd_64.h (x86-64) and asm-generic/unistd.h (arm64). */
const ARCHES: Readonly<Record<string, Arch>> = {
  x64: { audit: 0xc000003e, socket: 41, denied: [425, 248, 249, 250], x32Bit: 0x40000000 },
  arm64: { audit: 0xc00000b7, socket: 198, denied: [425, 217, 218, 219] },
};

const AF_UNIX = 1;
const EPERM = 1;

// linux/filter.h, linux/seccomp.h
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const RET_KILL_PROCESS = 0x80000000;
// struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian: low half first).
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;

/** Where a conditional jump goes: on to the next instruction, or to one of the program's three returns. */
type Target = 'next' | 'allow' | 'deny' | 'kill';
const RETURNS: readonly [Exclude<Target, 'next'>, number][] = [
  ['allow', RET_ALLOW],
  ['deny', RET_ERRNO | EPERM],
  ['kill', RET_KILL_PROCESS],
];

/** A load of the word at `offset` of struct seccomp_data. */
const load = (offset: number) => ({ code: LD_W_ABS, k: offset });
/** A jump on the loaded word: to `yes` when the test holds, else to `no`. */
const jump = (code: number, k: number, yes: Target, no: Target) => ({ code, k, yes, no });

/** The architectures a filter exists for (Node's `process.arch` names). */
export const SECCOMP_ARCHES = Object.keys(ARCHES);

/** The filter for `arch` as bubblewrap reads it (struct sock_filter[], little-endian); undefined for other architectures. */
export function seccompProgram(arch: string = process.arch): Buffer | undefined {
  const a = ARCHES[arch];
  if (!a) return undefined;
  const checks: { code: number; k: number; yes?: Target; no?: Target }[] = [
    load(ARCH),
    jump(JEQ_K, a.audit, 'next', 'kill'),
    load(NR),
    ...(a.x32Bit ? [jump(JGE_K, a.x32Bit, 'kill', 'next')] : []),
    ...a.denied.map((nr) => jump(JEQ_K, nr, 'deny', 'next')),
    jump(JEQ_K, a.socket, 'next', 'allow'),
    load(ARG0_LOW),
    jump(JEQ_K, AF_UNIX, 'deny', 'allow'),
  ];
  // BPF jumps only forward, counted from the next instruction; the returns follow the checks.
  const offset = (from: number, to: Target | undefined) =>
    to === undefined || to === 'next' ? 0 : checks.length + RETURNS.findIndex(([name]) => name === to) - from - 1;
  const program = Buffer.alloc((checks.length + RETURNS.length) * 8);
  const write = (i: number, code: number, jt: number, jf: number, k: number) => {
    program.writeUInt16LE(code, i * 8);
    program.writeUInt8(jt, i * 8 + 2);
    program.writeUInt8(jf, i * 8 + 3);
    program.writeUInt32LE(k >>> 0, i * 8 + 4);
  };
  checks.forEach(({ code, k, yes, no }, i) => write(i, code, offset(i, yes), offset(i, no), k));
  RETURNS.forEach(([, value], i) => write(checks.length + i, RET_K, 0, 0, value));
  return program;
}
