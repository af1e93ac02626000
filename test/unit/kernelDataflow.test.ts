import assert from 'node:assert/strict';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { collectRun, IPYTHON_PYTHON, PYTHON, SCRIPT } from './support/kernelRuns';

/**
 * The builtin kernel's record of what each cell run read and changed (kernel_dataflow.py), on
 * both paths: IPython (Debian's python3 with pandas) and plain Python.
 */
for (const [path, python, ipython] of [
  ['IPython', IPYTHON_PYTHON, '1'],
  ['plain Python', PYTHON, '0'],
] as const) {
  describe(`the run's record of the names it read and changed (${path})`, function () {
    this.timeout(30_000);
    let kernel: KernelProcess;
    beforeEach(async () => {
      kernel = new KernelProcess({ python, script: SCRIPT, env: { ...process.env, AGENT_BRIDGE_IPYTHON: ipython } });
      await kernel.start();
    });
    afterEach(() => kernel.dispose());

    const record = async (code: string) => {
      const r = await collectRun(kernel, code);
      assert.equal(r.success, true, `${code}: ${r.stderr}${r.errors.map((e) => e.traceback).join('')}`);
      return r.dataflow;
    };

    it('a name read only in a branch the run did not take is not read; one read in the branch it took is (outside loops)', async () => {
      await record('debug = False\ndf = {"a": 1}\nrows = []');
      assert.deepEqual(await record('if debug:\n    print(df)\nelse:\n    n = 1'), {
        reads: ['debug'],
        defines: ['n'],
        mutates: [],
      });
      // Inside a loop no branch is marked (a mark would cost each iteration): all count as taken.
      assert.deepEqual(await record('for i in range(3):\n    if i > 5:\n        rows.append(df)\ntotal = 0'), {
        reads: ['df', 'rows'],
        defines: ['i', 'total'],
        mutates: ['rows'],
      });
      assert.deepEqual(await record('try:\n    v = df["a"]\nexcept KeyError:\n    v = rows'), {
        reads: ['df'],
        defines: ['v'],
        mutates: [],
      });
    });

    it('sees changes the code does not show: inside a called function, through another name', async () => {
      await record('items = [1]\ntable = {}\ndef fill(t):\n    t["k"] = 1');
      assert.deepEqual(await record('fill(table)'), { reads: ['fill', 'table'], defines: [], mutates: ['table'] });
      assert.deepEqual(await record('alias = items\nalias.append(2)'), {
        reads: ['items'],
        defines: ['alias'],
        mutates: ['items'],
      });
      assert.deepEqual(await record('items = items + [3]'), { reads: ['items'], defines: ['items'], mutates: [] });
    });

    it("a module's function named like a mutating method changes nothing; builtins and the shell's names are not listed", async () => {
      await record('import math\nvalues = [3, 1, 2]');
      assert.deepEqual(await record('values.sort()\nprint(len(values), math.pi)'), {
        reads: ['math', 'values'],
        defines: [],
        mutates: ['values'],
      });
      await record('import collections');
      assert.deepEqual(await record('collections.update = None'), { reads: ['collections'], defines: [], mutates: [] });
    });

    if (python === IPYTHON_PYTHON)
      it('pandas and numpy: sees a new column, a changed dtype and a changed sampled value; a copy or a read changes nothing', async () => {
        await record('import numpy as np\nimport pandas as pd\ndf = pd.DataFrame({"t": [1, 2, 3]})\narr = np.zeros(1000)');
        const viaFunction = (body: string) => `def change(frame):\n    ${body}\nchange(df)`;
        for (const body of ['frame["c"] = 1', 'frame["t"] = frame["t"].astype(float)', 'frame.loc[0, "t"] = 99'])
          assert.deepEqual((await record(viaFunction(body)))?.mutates, ['df'], body);
        assert.deepEqual(await record('copy = df.copy()\ncopy["x"] = 1\ndf.dtypes'), {
          reads: ['df'],
          defines: ['copy'],
          mutates: [],
        });
        assert.deepEqual((await record('def zero(a):\n    a[999] = 1\nzero(arr)'))?.mutates, ['arr']);
      });
  });
}
