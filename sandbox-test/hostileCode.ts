/**
 * Python that defines `spin`, whose repr switches tracing off (so no trace function can stop it)
 * and loops: what a variables read must survive. Shared by the unit tests and the harness.
 */
export const SPIN_REPR = [
  'import sys',
  'class SpinRepr:',
  '    def __repr__(self):',
  '        sys.settrace(None)',
  '        while True: pass',
  'spin = SpinRepr()',
].join('\n');
