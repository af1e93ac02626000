"""The risk scan: what an agent's code would do that the person may want to know before it runs.

Stdlib only, Python 3.8+, run as `python -I -S risk_scan.py`: a process of its own, never a
kernel, so code that ran before cannot change how later code is judged, and no package or
`.pth` file of the interpreter's site-packages is loaded.

One question a line on stdin, {"id", "code", "cwd", "roots", "home"}; one answer a line on
stdout, {"id", "findings": [{tier, kind, pattern, line, reason}], "omitted"?: n} or {"id",
"failed": text}. `cwd` is where the kernel runs (relative paths), `roots` the workspace folders.

The code is read by Python's own parser after IPython's escapes (`!cmd`, `%magic`, `%%magic`,
`/f a`, `,f a`, `;f a`, a one-line cell naming a magic) are turned into what they run, so a
magic is judged by what it runs. Nothing of the code is run, imported or evaluated. This is a
warning light, not a boundary: code can hide what it does from any reading (names built at run
time, files it imports); the kernel's sandbox is the boundary.
"""

import ast
import json
import os
import re
import sys
import threading

MAX_FINDINGS = 50
LITERAL_DEPTH = 3  # exec("...") scanned inside, and so on, this deep

TIER = {
    "process": "critical",
    "dynamic-code": "critical",
    "native-code": "critical",
    "network": "high",
    "secret-read": "high",
    "environment": "high",
    "unpickle": "high",
    "workers": "high",
    "signal": "high",
    "unreadable": "high",
    "install": "medium",
    "magic": "medium",
}

# ---- what calls do --------------------------------------------------------------------------

PROCESS = {
    "subprocess." + n
    for n in ("run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput")
} | {
    "os." + n
    for n in (
        "system popen fork forkpty posix_spawn posix_spawnp startfile "
        "spawnl spawnle spawnlp spawnlpe spawnv spawnve spawnvp spawnvpe "
        "execl execle execlp execlpe execv execve execvp execvpe"
    ).split()
} | {
    "pty.spawn",
    "pty.fork",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "pexpect.spawn",
    "pexpect.run",
    "platform.popen",
    "commands.getoutput",
}
PROCESS_MODULES = ("sh", "plumbum")
PROCESS_METHODS = {"subprocess_exec", "subprocess_shell"}  # an event loop's

NETWORK = {
    "socket.socket",
    "socket.create_connection",
    "socket.create_server",
    "urllib.request.urlopen",
    "urllib.request.urlretrieve",
    "urllib.request.build_opener",
    "http.client.HTTPConnection",
    "http.client.HTTPSConnection",
    "asyncio.open_connection",
    "asyncio.start_server",
}
NETWORK_MODULES = (
    "requests httpx aiohttp urllib3 paramiko websocket websockets pycurl ftplib smtplib poplib "
    "imaplib telnetlib nntplib xmlrpc.client grpc boto3 botocore socketserver http.server"
).split()

UNPICKLE = {
    "pickle.load",
    "pickle.loads",
    "pickle.Unpickler",
    "_pickle.load",
    "_pickle.loads",
    "cPickle.load",
    "cPickle.loads",
    "dill.load",
    "dill.loads",
    "cloudpickle.load",
    "cloudpickle.loads",
    "joblib.load",
    "pandas.read_pickle",
    "shelve.open",
    "marshal.load",
    "marshal.loads",
    "yaml.unsafe_load",
}

NATIVE_MODULES = ("ctypes", "_ctypes", "cffi")
WORKERS = {"multiprocessing.Process", "multiprocessing.Pool", "concurrent.futures.ProcessPoolExecutor"}
SIGNALS = {"os.kill", "os.killpg", "signal.pthread_kill"}
RUNS_FILES = {"runpy.run_path", "runpy.run_module", "execfile"}
INSTALLERS = {"pip.main", "pip._internal.main", "pip._internal.cli.main.main"}
# Modules whose functions a computed name may reach.
REACHABLE = ("os", "posix", "subprocess", "builtins", "shutil", "ctypes", "sys", "importlib", "socket", "pty")

# File operations: (path argument, its keyword) of what is read, written or deleted.
DELETES = {n: (0, "path") for n in ("os.remove", "os.unlink", "os.rmdir", "os.removedirs")}
WRITES = {
    n: (0, "path")
    for n in ("os.mkdir", "os.makedirs", "os.mkfifo", "os.mknod", "os.chmod", "os.chown", "os.lchown", "os.utime", "os.truncate")
}
WRITES.update({n: (0, "file") for n in ("numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt")})
WRITES.update({"torch.save": (1, "f"), "joblib.dump": (1, "filename"), "shutil.make_archive": (0, "base_name")})
WRITES.update({"matplotlib.pyplot.savefig": (0, "fname")})
READS = {n: (0, "path") for n in ("os.listdir", "os.scandir", "os.walk")}
READS.update({n: (0, "pathname") for n in ("glob.glob", "glob.iglob")})
READS.update({n: (0, "file") for n in ("numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile")})
COPIES = {n: "copy" for n in ("shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.copymode", "shutil.copystat")}
COPIES.update({"shutil.move": "move", "os.rename": "move", "os.renames": "move", "os.replace": "move"})
OPENERS = {"open", "io.open", "codecs.open"}

# Methods judged by their name whatever the object (a DataFrame's, a figure's, a Path's).
WRITER_METHODS = set(
    "to_csv to_parquet to_excel to_json to_pickle to_feather to_hdf to_stata to_xml to_orc to_latex "
    "to_html to_markdown to_netcdf to_zarr tofile savefig".split()
)
WRITER_KEYWORDS = ("path_or_buf", "path", "buf", "excel_writer", "fname", "filename", "file")
PATH_WRITES = {"write_text", "write_bytes", "touch", "mkdir"}  # the object is the path
DELETE_METHODS = {"unlink", "rmdir"}
READ_METHODS = {"read_text", "read_bytes"}
# Ambiguous names (str.replace, any object's open): judged only on a plain pathlib path.
PATH_METHODS = {"rename": "move", "replace": "move", "open": "open", "chmod": "write", "symlink_to": "write", "iterdir": "read"}
ENVIRON = ("os.environ", "os.environb")
ENVIRON_ONE_KEY = {"get", "setdefault", "pop", "update", "__setitem__", "__delitem__"}
# Names notebooks use for modules without always importing them in the code at hand.
USUAL_NAMES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "Path": "pathlib.Path"}

SECRET_DIRS = (
    ".ssh .aws .gnupg .azure .kube .docker .config/gcloud .config/gh .password-store .local/share/keyrings "
    ".netrc .pgpass .git-credentials .npmrc .pypirc .bash_history .zsh_history .python_history"
).split()
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
URL = re.compile(r"^(https?|ftp|s3|gs|gcs|az|abfss?)://", re.I)
SHELL_META = re.compile(r"[;&|`$<>(){}\n]")
INSTALL = re.compile(r"^(python3?\s+-m\s+)?(pip3?|uv\s+pip|uv\s+add|conda|mamba|micromamba)\s+(install|uninstall|remove|add)\b")

# ---- IPython's magics, by what they run --------------------------------------------------------

SHELL_MAGICS = {"system", "sx", "sc", "!", "bash", "sh", "script", "perl", "ruby", "pypy", "python", "python2", "python3"}
PROGRAMS = {"perl", "ruby", "pypy", "python", "python2", "python3"}  # cell magics that hand their body to that program
# IPython's default shell aliases (each runs the command of its name), and magics that start a program.
ALIASES = {"cat", "cp", "ldir", "less", "lf", "lk", "ll", "ls", "lx", "man", "mkdir", "more", "mv", "rm", "rmdir", "clear"}
PROGRAM_MAGICS = {
    "ed": "opens an editor program",
    "edit": "opens an editor program",
    "rehashx": "makes every program on PATH a magic",
    "alias": "defines a shell command as a magic",
}
INSTALL_MAGICS = {"pip", "conda", "mamba", "micromamba", "uv"}
PYTHON_MAGICS = {"time", "timeit", "prun", "debug", "capture"}  # their argument or body is Python run here
FILE_MAGICS = {"writefile", "file", "save", "logstart", "notebook"}
# What they do stays in the kernel or the editor.
QUIET_MAGICS = set(
    "alias_magic autoawait autocall automagic bookmark cd colors config dhist dirs doctest_mode gui hist history "
    "killbgscripts load loadpy load_ext logoff logon logstate logstop lsmagic macro magic matplotlib page pdb pdef "
    "pdoc pfile pinfo pinfo2 popd pprint precision psearch psource pushd pwd pycat pylab quickref recall rep "
    "reload_ext reset reset_selective set_env tb unalias unload_ext who who_ls whos xdel xmode "
    "html HTML svg SVG javascript js latex markdown".split()
)
# IPython's line magics: a one-line cell naming one runs it (automagic).
LINE_MAGICS = (SHELL_MAGICS | ALIASES | set(PROGRAM_MAGICS) | INSTALL_MAGICS | PYTHON_MAGICS | FILE_MAGICS | QUIET_MAGICS) - {
    "!", "bash", "sh", "script", "perl", "ruby", "pypy", "python", "python2", "python3", "capture", "writefile", "file",
} | {"run", "rerun", "env", "pastebin"}

ESCAPED = re.compile(r"^(\s*)(?:([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*)?(!!|!|%%|%|/|,|;)(.*)$")
AUTOMAGIC = re.compile(r"^\s*([A-Za-z_][\w.]*)(\s*)(.*)$")


class _Places:
    """Where a path is: the workspace, a secrets folder, elsewhere under home, /proc, elsewhere, or a URL."""

    def __init__(self, cwd, roots, home):
        real = lambda p: os.path.realpath(p) if p else ""
        self.home = real(home)
        self.roots = [r for r in (real(r) for r in roots if isinstance(r, str) and r) if r]
        self.cwd = real(cwd) or (self.roots[0] if self.roots else os.getcwd())
        if not self.roots:
            self.roots = [self.cwd]  # a notebook outside any folder: its own folder is its workspace

    def absolute(self, text):
        if text == "~" or text.startswith("~/"):
            text = self.home + text[1:]  # pandas and shells expand it
        path = os.path.normpath(os.path.join(self.cwd, text))
        try:
            return os.path.realpath(path)  # a link inside the workspace to elsewhere is elsewhere
        except (OSError, ValueError):
            return path

    def where(self, text):
        if URL.match(text):
            return "url", text
        path = self.absolute(text)
        if any(_under(path, r) for r in self.roots):
            return "workspace", path
        if path.startswith("/proc/"):
            return "proc", path
        if self.home and _under(path, self.home):
            rest = os.path.relpath(path, self.home)
            if any(rest == d or rest.startswith(d + os.sep) for d in SECRET_DIRS):
                return "secrets", path
            return "home", path
        return "outside", path


def _under(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _cut(text, limit=80):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class _Findings:
    def __init__(self):
        self.items = []
        self.seen = set()
        self.omitted = 0

    def add(self, kind, pattern, line, reason, tier=None):
        key = (kind, pattern, line)
        if key in self.seen:
            return
        self.seen.add(key)
        if len(self.items) >= MAX_FINDINGS:
            self.omitted += 1
            return
        self.items.append({"tier": tier or TIER[kind], "kind": kind, "pattern": pattern, "line": line, "reason": reason})


# ---- IPython's escapes, as what they run ------------------------------------------------------


class _Magic:
    """One magic (or shell escape) at a line: its name, its argument line (None: built at run
    time), and a cell magic's body."""

    def __init__(self, line, via, name, args, body=None):
        self.line, self.via, self.name, self.args, self.body = line, via, name, args, body


def _split_magic(rest):
    name, _, args = rest.strip().partition(" ")
    return name, args.strip()


def _escapes(code):
    """The code as the Python IPython runs, each escape replaced in place (line numbers kept), and
    the magics found; None when nothing is escaped. A `!` line inside a triple-quoted string stays text."""
    lines = code.split("\n")
    out = list(lines)
    first = next((i for i, l in enumerate(lines) if l.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name, args = _split_magic(lines[first].lstrip()[2:])
        body = "\n".join(lines[first + 1 :])
        return "\n".join(["pass" if i == first else "" for i in range(len(lines))]), [_Magic(first + 1, "%%" + name, name, args, body)]
    magics = []
    quote = None
    for i, text in enumerate(lines):
        if quote is None:
            m = ESCAPED.match(text)
            if m and (m.group(3) not in "/,;" or m.group(4)[:1].isalpha() or m.group(4)[:1] == "_"):
                indent, target, esc, rest = m.groups()
                out[i] = indent + _escaped_python(esc, rest, target, magics, i + 1)
            elif re.match(r"^\s*%?[\w.]+\?\??\s*$", text):
                out[i] = re.match(r"^\s*", text).group(0) + "pass"  # help: `obj?`
        quote = _open_quote(out[i], quote)
    return ("\n".join(out), magics) if out != lines else None


def _escaped_python(esc, rest, target, magics, line):
    """The Python one escaped line stands for; a magic it runs goes to `magics`."""
    assign = "%s = None" % target if target else "pass"
    if esc in ("!", "!!"):
        magics.append(_Magic(line, esc, "system", rest.strip()))
        return assign
    if esc in ("%", "%%"):  # a `%%` below the first line is a line magic named "%..."
        name, args = _split_magic(rest)
        magics.append(_Magic(line, esc + name, name if esc == "%" else "%" + name, args))
        return assign
    # IPython's call escapes: `/f a b` is f(a, b), `,f a b` is f("a", "b"), `;f a b` is f("a b").
    func, _, args = rest.partition(" ")
    if esc == "/":
        call = "%s(%s)" % (func, ", ".join(args.split()))
    elif esc == ",":
        call = "%s(%s)" % (func, ", ".join(json.dumps(w) for w in args.split()))
    else:
        call = "%s(%s)" % (func, json.dumps(args.strip()))
    return "%s = %s" % (target, call) if target else call


def _open_quote(text, quote):
    """The triple quote left open after this line (None: none)."""
    i = 0
    while i < len(text):
        if quote is None:
            if text[i] == "#":
                return None
            if text.startswith('"""', i) or text.startswith("'''", i):
                quote = text[i : i + 3]
                i += 3
                continue
            if text[i] in "\"'":
                end = text.find(text[i], i + 1)
                i = len(text) if end < 0 else end + 1
                continue
        elif text.startswith(quote, i):
            quote = None
            i += 3
            continue
        elif text[i] == "\\":
            i += 1
        i += 1
    return quote


def _automagic(code):
    """A one-line cell IPython runs as a magic (automagic is on by default): `ls -la`, `pip install x`,
    `run(x)`, unless the name is assigned (`ls = 1`) or bound in the kernel (which no scan can know)."""
    text = code.strip()
    if "\n" in text:
        return None
    m = AUTOMAGIC.match(text)
    if not m:
        return None
    name, _, rest = m.groups()
    if "." in name or name not in LINE_MAGICS or rest[:1] in ("=", ","):
        return None
    return _Magic(1, name, name, rest.strip())


# ---- the reading ------------------------------------------------------------------------------


class _Context:
    """What every reading of one question shares: where paths are, the findings, and the names the
    notebook's cells import or bind (a run may use `sp.run` where a cell did `import subprocess as sp`)."""

    def __init__(self, places, known=None):
        self.places = places
        self.findings = _Findings()
        self.known = dict(USUAL_NAMES)
        self.known.update(known or {})


class _Scan(ast.NodeVisitor):
    def __init__(self, ctx, depth=0, line=None):
        self.ctx = ctx
        self.places = ctx.places
        self.depth = depth
        self.at_line = line  # code inside a literal: its findings are at the line of the call that runs it
        self.aliases = dict(ctx.known)  # name -> what it stands for ("subprocess", "os.system")
        self.values = {}  # name -> the expression last assigned to it
        self.shadowed = set()  # names this code binds to something unknown (a def named `open`)
        self.environ_ok = set()  # os.environ nodes read or set one literal key at a time
        self.env_keyword = set()  # env=os.environ handed to a program: the program is the finding

    def add(self, kind, pattern, node, reason, tier=None):
        self.ctx.findings.add(kind, pattern, self.at_line or getattr(node, "lineno", 1), reason, tier)

    # -- names

    def visit_Import(self, node):
        for alias in node.names:
            top = alias.name.split(".")[0]
            self.bind_name(alias.asname or top, alias.name if alias.asname else top)
            self.imported(alias.name, node)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level:
            return  # the package's own module
        self.imported(module, node)
        for alias in node.names:
            if alias.name == "*":
                if _in_modules(module, PROCESS_MODULES + ("subprocess", "os", "posix", "pty")):
                    self.add("process", "from %s import *" % module, node, "imports every function of %s, which start programs" % module)
                continue
            self.bind_name(alias.asname or alias.name, "%s.%s" % (module, alias.name))
            self.imported("%s.%s" % (module, alias.name), node)

    def imported(self, name, node):
        if _in_modules(name, NATIVE_MODULES):
            top = name.split(".")[0]
            self.add("native-code", top, node, "%s calls C functions directly and can write any memory of the kernel" % top)

    def bind_name(self, name, qual):
        self.aliases[name] = _normal(qual)
        self.shadowed.discard(name)

    def visit_FunctionDef(self, node):
        self.shadowed.add(node.name)
        self.aliases.pop(node.name, None)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Assign(self, node):
        self.visit(node.value)
        for target in node.targets:
            self.bind(target, node.value)
            if not isinstance(target, ast.Name):
                self.visit(target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
            self.bind(node.target, node.value)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self.bind(node.target, node.value)

    def bind(self, target, value):
        if not isinstance(target, ast.Name):
            return
        qual = self.qual(value)
        self.values[target.id] = value
        if qual:
            self.bind_name(target.id, qual)
        else:
            self.aliases.pop(target.id, None)
            self.shadowed.add(target.id)

    def qual(self, node, depth=0):
        """The dotted name an expression stands for (a module, a function), or None. A name the code
        leaves free is taken as the module or builtin of that name (`os` bound in an earlier run)."""
        if depth > 20:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in self.shadowed:
                return None
            return "builtins" if node.id == "__builtins__" else node.id
        if isinstance(node, ast.Attribute):
            base = self.qual(node.value, depth + 1)
            if not base:
                return None
            return base if node.attr == "__dict__" else _normal("%s.%s" % (base, node.attr))
        if isinstance(node, ast.Call):
            func = self.qual(node.func, depth + 1)
            first = _literal(node.args[0]) if node.args else None
            if func in ("__import__", "importlib.import_module") and isinstance(first, str):
                return first.split(".")[0] if func == "__import__" else first
            if func == "getattr" and len(node.args) >= 2:
                base, attr = self.qual(node.args[0], depth + 1), _literal(node.args[1])
                return _normal("%s.%s" % (base, attr)) if base and isinstance(attr, str) else None
            if func == "vars" and node.args:
                return self.qual(node.args[0], depth + 1)
            if func in ("globals", "locals", "get_ipython"):
                return func + "()"
            return None
        if isinstance(node, ast.Subscript):
            base = self.qual(node.value, depth + 1)
            key = _literal(_index(node))
            if not base or not isinstance(key, str):
                return None
            if base == "sys.modules":
                return key
            if base in ("globals()", "locals()"):
                return self.qual(ast.Name(id=key, ctx=ast.Load()), depth + 1)
            return _normal("%s.%s" % (base, key))
        return None

    def path(self, node, depth=0):
        """The path an expression holds where the code says it plainly (literals, joins, Path(...)); else None."""
        if node is None or depth > 20:
            return None
        text = _literal(node)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if isinstance(text, str):
            return text
        if isinstance(node, ast.Name):
            return self.path(self.values.get(node.id), depth + 1)
        if isinstance(node, ast.JoinedStr):
            parts = [_literal(v) for v in node.values]
            return "".join(parts) if all(isinstance(p, str) for p in parts) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
            left, right = self.path(node.left, depth + 1), self.path(node.right, depth + 1)
            if left is None or right is None:
                return None
            return os.path.join(left, right) if isinstance(node.op, ast.Div) else left + right
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            base = self.path(node.value, depth + 1)
            return os.path.dirname(base.rstrip("/")) if base else None
        if not isinstance(node, ast.Call):
            return None
        func = self.qual(node.func)
        args = [self.path(a, depth + 1) for a in node.args]
        whole = all(a is not None for a in args)
        if func in ("pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath", "os.path.join", "os.fspath", "str"):
            return (os.path.join(*args) if args else ".") if whole else None
        if func in ("pathlib.Path.home", "os.path.expanduser") and not node.args:
            return "~"
        if func in ("os.path.expanduser", "os.path.abspath", "os.path.realpath", "os.path.normpath"):
            return args[0] if args else None
        if func in ("pathlib.Path.cwd", "os.getcwd"):
            return "."
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method in ("expanduser", "resolve", "absolute"):
                return self.path(node.func.value, depth + 1)
            if method == "joinpath":
                base = self.path(node.func.value, depth + 1)
                return os.path.join(base, *args) if base is not None and whole else None
        return None

    def is_path(self, node, depth=0):
        """Whether an expression is plainly a pathlib path (where `.open`, `.rename` are a path's)."""
        if depth > 20:
            return False
        if isinstance(node, ast.Name):
            return node.id in self.values and self.is_path(self.values[node.id], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.is_path(node.left, depth + 1)
        if isinstance(node, ast.Attribute):
            return node.attr == "parent" and self.is_path(node.value, depth + 1)
        if isinstance(node, ast.Call):
            if (self.qual(node.func) or "").startswith("pathlib."):
                return True
            return (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in ("expanduser", "resolve", "absolute", "joinpath", "with_name", "with_suffix")
                and self.is_path(node.func.value, depth + 1)
            )
        return False

    # -- what calls do

    def visit_Call(self, node):
        func = self.qual(node.func)
        if not (func and self.call(node, func)) and isinstance(node.func, ast.Attribute):
            self.method(node, node.func.attr)
        for kw in node.keywords:
            if kw.arg == "env":
                self.env_keyword.add(id(kw.value))
        self.generic_visit(node)

    def call(self, node, func):
        """Judges a call by the function it names; True when it is one this scan knows."""
        first = node.args[0] if node.args else None
        if func in PROCESS or _in_modules(func, PROCESS_MODULES):
            self.add("process", func, node, "starts a program%s" % _command_note(first))
        elif func in ("eval", "exec", "compile", "execfile", "get_ipython().ex", "get_ipython().ev", "get_ipython().run_cell"):
            self.dynamic(node, func, first)
        elif func in ("__import__", "importlib.import_module"):
            name = _literal(first)
            if isinstance(name, str):
                self.imported(name, node)
            else:
                self.add("dynamic-code", func, node, "imports a module whose name is computed at run time")
        elif func == "getattr" and len(node.args) >= 2 and not isinstance(_literal(node.args[1]), str):
            base = self.qual(node.args[0])
            if base and _in_modules(base, REACHABLE):
                self.add("dynamic-code", "getattr(%s, …)" % base, node, "reaches a function of %s by a name computed at run time" % base)
        elif func in RUNS_FILES:
            self.add("dynamic-code", func, node, "runs the code of another file, which this scan does not read")
        elif func in NETWORK or _in_modules(func, NETWORK_MODULES):
            self.add("network", func, node, "opens a network connection%s" % _url_note(first))
            if func == "urllib.request.urlretrieve" and len(node.args) > 1:
                self.file("write", func, node, node.args[1])
        elif func in UNPICKLE:
            if not (func.endswith("loads") and isinstance(_literal(first), (bytes, str))):  # data right in the code
                self.add("unpickle", func, node, "unpickling runs whatever code the data carries")
        elif func == "torch.load":
            if _literal(_keyword(node, "weights_only")) is not True:
                self.add("unpickle", func, node, "torch.load unpickles (weights_only=True loads tensors only)")
            self.file("read", func, node, first)
        elif func == "numpy.load":
            if _literal(_keyword(node, "allow_pickle")) is True:
                self.add("unpickle", func, node, "allow_pickle=True unpickles whatever code the file carries")
            self.file("read", func, node, self.arg(node, 0, "file"))
        elif func == "yaml.load":
            loader = self.qual(self.arg(node, 1, "Loader") or ast.Constant(None)) or ""
            if not loader.endswith(("SafeLoader", "CSafeLoader", "BaseLoader")):
                self.add("unpickle", func, node, "yaml.load without a safe Loader can build any Python object")
        elif func in WORKERS:
            self.add("workers", func, node, "starts worker processes")
        elif func in SIGNALS:
            self.add("signal", func, node, "sends a signal to a process (the editor's among them)")
        elif func in INSTALLERS:
            self.add("install", func, node, "installs packages")
        elif func in ("os.getenv", "os.environ.get", "os.environb.get"):
            self.env_key(node, func, first)
        elif func == "shutil.rmtree":
            path = self.path(first)
            where = _cut(self.places.absolute(path)) if path is not None else "at a path the scan cannot read"
            self.add("delete", func, node, "deletes a whole folder tree: %s" % where, "critical")
        elif func in DELETES:
            self.file("delete", func, node, self.arg(node, *DELETES[func]))
        elif func in WRITES:
            self.file("write", func, node, self.arg(node, *WRITES[func]))
        elif func in READS:
            self.file("read", func, node, self.arg(node, *READS[func]) or ast.Constant("."))
        elif func in COPIES:
            self.file("read", func, node, self.arg(node, 0, "src"))
            if COPIES[func] == "move":
                self.file("delete", func, node, self.arg(node, 0, "src"))
            self.file("write", func, node, self.arg(node, 1, "dst"))
        elif func in ("os.symlink", "os.link"):
            target = self.path(self.arg(node, 0, "src"))
            if target is not None and self.places.where(target)[0] != "workspace":
                self.add("write", func, node, "links to %s, outside the workspace" % _cut(self.places.absolute(target)), "critical")
            self.file("write", func, node, self.arg(node, 1, "dst"))
        elif func in OPENERS:
            self.opened(node, func, self.arg(node, 0, "file"), self.arg(node, 1, "mode"))
        elif func == "os.open":
            flags = self.arg(node, 1, "flags")
            names = {n.attr for n in ast.walk(flags) if isinstance(n, ast.Attribute)} if flags is not None else set()
            writes = not names or names & {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
            self.file("write" if writes else "read", func, node, self.arg(node, 0, "path"))
        elif func in ("zipfile.ZipFile", "tarfile.open"):
            mode = _literal(self.arg(node, 1, "mode"))
            if isinstance(mode, str) and mode[:1] in "wax":
                self.file("write", func, node, first)
        elif func.startswith("get_ipython()."):
            self.ipython(node, func[len("get_ipython().") :])
        else:
            return False
        return True

    def method(self, node, name):
        """Judges a call by its method's name, whatever the object (a DataFrame's, a figure's, a Path's)."""
        receiver = node.func.value
        if name in PROCESS_METHODS:
            self.add("process", "." + name, node, "starts a program")
        elif name == "read_pickle":
            self.add("unpickle", ".read_pickle", node, "unpickling runs whatever code the data carries")
        elif name.startswith("read_") and name not in READ_METHODS:
            path = self.arg(node, 0, "filepath_or_buffer")
            self.file("read", "." + name, node, path if path is not None else _keyword(node, "path") or _keyword(node, "io"))
        elif name in PATH_WRITES:
            self.file("write", "." + name, node, receiver)
        elif name in WRITER_METHODS:
            target = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in WRITER_KEYWORDS), None)
            if target is not None:
                self.file("write", "." + name, node, target)
        elif name in DELETE_METHODS:
            self.file("delete", "." + name, node, receiver)
        elif name in READ_METHODS:
            self.file("read", "." + name, node, receiver)
        elif name == "extractall":
            self.file("write", ".extractall", node, self.arg(node, 0, "path") or ast.Constant("."))
        elif name in PATH_METHODS and self.is_path(receiver):
            what = PATH_METHODS[name]
            if what == "open":
                self.opened(node, "pathlib.Path.open", receiver, self.arg(node, 0, "mode"))
            elif what == "move":
                self.file("delete", "pathlib.Path." + name, node, receiver)
                self.file("write", "pathlib.Path." + name, node, self.arg(node, 0, "target"))
            else:
                self.file(what, "pathlib.Path." + name, node, receiver)

    def arg(self, node, index, keyword):
        if len(node.args) > index and not isinstance(node.args[index], ast.Starred):
            return node.args[index]
        return _keyword(node, keyword)

    def dynamic(self, node, func, first):
        code = _literal(first)
        if isinstance(code, bytes):
            code = code.decode("utf-8", "replace")
        if not isinstance(code, str):
            return self.add("dynamic-code", func, node, "runs code built at run time, which this scan cannot read")
        if self.depth < LITERAL_DEPTH:  # the code is right there: read it
            mode = "eval" if func in ("eval", "get_ipython().ev") else "exec"
            _scan_into(code, self.ctx, self.depth + 1, line=self.at_line or node.lineno, mode=mode)
        return None

    def opened(self, node, func, path_node, mode_node):
        mode = "r" if mode_node is None else _literal(mode_node)
        if not isinstance(mode, str):
            return self.file("write", func, node, path_node, " (in a mode the scan cannot read)")
        return self.file("write" if set(mode) & set("wax+") else "read", func, node, path_node)

    def file(self, op, pattern, node, path_node, note=""):
        """A read, write or delete of a file, judged by where the file is."""
        text = self.path(path_node)
        if text is None:
            if op == "write":
                return self.add("write", pattern, node, "writes a file at a path the scan cannot read%s" % note, "medium")
            if op == "delete":
                return self.add("delete", pattern, node, "deletes a file at a path the scan cannot read", "high")
            return None
        where, path = self.places.where(text)
        if where == "url":
            return self.add("network", pattern, node, "%s %s" % ("fetches" if op == "read" else "sends data to", _cut(text)))
        if op == "read":
            if where == "secrets":
                return self.add("secret-read", pattern, node, "reads %s, where credentials are kept" % _cut(path))
            if where == "home":
                return self.add("secret-read", pattern, node, "reads %s, in your home folder outside the workspace" % _cut(path))
            if where == "proc":
                return self.add("environment", pattern, node, "reads process details (%s)" % _cut(path))
            return None
        verb = "writes" if op == "write" else "deletes"
        if where == "workspace":
            return self.add(op, pattern, node, "%s %s in the workspace%s" % (verb, _cut(path), note), "medium")
        return self.add(op, pattern, node, "%s %s, outside the workspace%s" % (verb, _cut(path), note), "critical")

    def env_key(self, node, func, key_node):
        key = _literal(key_node)
        if isinstance(key, bytes):
            key = key.decode("utf-8", "replace")
        if not isinstance(key, str):
            return self.add("environment", func, node, "reads environment variables by computed names (tokens live there)")
        if SECRET_NAME.search(key):
            return self.add("environment", func, node, "reads the environment variable %s, named like a secret" % _cut(key, 40))
        return None

    def ipython(self, node, method):
        """get_ipython().system(...), run_line_magic(...), run_cell_magic(...): the magic they run."""
        texts = [_literal(a) for a in node.args]
        texts = [t if isinstance(t, str) else None for t in texts]
        line = self.at_line or node.lineno
        if method in ("system", "getoutput"):
            return self.magic(_Magic(line, "get_ipython()." + method, "system", texts[0] if texts else None))
        if method not in ("run_line_magic", "magic", "run_cell_magic"):
            return None
        if not texts or texts[0] is None:
            return self.add("dynamic-code", "get_ipython()." + method, node, "runs an IPython magic named at run time")
        if method == "magic":
            name, args = _split_magic(texts[0])
            return self.magic(_Magic(line, "%" + name, name.lstrip("%"), args))
        name = texts[0]
        args = texts[1] if len(texts) > 1 else None
        body = texts[2] if len(texts) > 2 else None
        if method == "run_cell_magic" and body is None:
            return self.add("dynamic-code", "get_ipython().run_cell_magic", node, "runs a cell magic on code built at run time")
        return self.magic(_Magic(line, ("%%" if method == "run_cell_magic" else "%") + name, name, args, body))

    # -- IPython's magics

    def magic(self, m):
        """Judges a magic by what it runs."""
        name, args, via = m.name, m.args, m.via
        at = ast.Constant(None)
        at.lineno = m.line
        if name in SHELL_MAGICS or name in ALIASES:
            if args is None:
                return self.add("process", via, at, "runs a shell command built at run time")
            command = "%s %s" % (name, args) if name in ALIASES else (m.body if m.body is not None else args)
            command = command.strip()
            if name in PROGRAMS and m.body is not None:
                _scan_into(m.body, self.ctx, self.depth + 1, offset=m.line)
            if name in ("system", "sx", "sc") and INSTALL.match(command) and not SHELL_META.search(command):
                pattern = via + command.split()[0] if via in ("!", "!!") else via
                return self.add("install", pattern, at, "installs packages: %s" % _cut(command))
            program = "the %s program" % name if name in PROGRAMS else "a shell command"
            return self.add("process", via, at, "runs %s: %s" % (program, _cut(command) or "(empty)"))
        if name in PROGRAM_MAGICS:
            return self.add("process", via, at, PROGRAM_MAGICS[name])
        if name in INSTALL_MAGICS:
            return self.add("install", via, at, "installs packages" + (": %s %s" % (name, _cut(args)) if args else ""))
        if name in ("run", "rerun"):
            what = "the code of another file" if name == "run" else "earlier input again"
            return self.add("dynamic-code", via, at, "runs %s, which this scan does not read%s" % (what, ": " + _cut(args) if args else ""))
        if name == "pastebin":
            return self.add("network", via, at, "uploads code to a pastebin")
        if name == "env":
            words = (args or "").split()
            if not words:
                return self.add("environment", via, at, "lists every environment variable (tokens live there)")
            if "=" not in args and SECRET_NAME.search(words[0]):
                return self.add("environment", via, at, "reads the environment variable %s, named like a secret" % _cut(words[0], 40))
            return None
        if name in FILE_MAGICS:
            words = [w for w in (args or "").split() if not w.startswith("-")]
            target = words[0] if words else ("ipython_log.py" if name == "logstart" else None)
            return self.file("write", via, at, ast.Constant(target) if target else None)
        if name in PYTHON_MAGICS:
            if m.body is not None:
                _scan_into(m.body, self.ctx, self.depth + 1, offset=m.line, ipython=True)
            elif args:
                _scan_into(_drop_options(args), self.ctx, self.depth + 1, line=m.line, ipython=True)
            return None
        if name in QUIET_MAGICS:
            return None
        return self.add("magic", via, at, "runs the %s magic, which this scan does not know" % via)

    # -- os.environ: one literal key at a time is a read; anything else reads them all

    def visit_Subscript(self, node):
        if self.qual(node.value) in ENVIRON:
            key = _literal(_index(node))
            if isinstance(key, (str, bytes)):
                self.environ_ok.add(id(node.value))
                key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
                if isinstance(node.ctx, ast.Load) and SECRET_NAME.search(key):
                    self.add("environment", "os.environ", node, "reads the environment variable %s, named like a secret" % _cut(key, 40))
        self.generic_visit(node)

    def visit_Compare(self, node):
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.In, ast.NotIn)) and self.qual(right) in ENVIRON:
                self.environ_ok.add(id(right))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        qual = self.qual(node)
        if qual in ENVIRON:
            self.environment(node, qual)
        elif isinstance(node.value, (ast.Name, ast.Attribute)) and self.qual(node.value) in ENVIRON and node.attr in ENVIRON_ONE_KEY:
            self.environ_ok.add(id(node.value))
        self.generic_visit(node)

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and self.aliases.get(node.id) in ENVIRON:
            self.environment(node, self.aliases[node.id])

    def environment(self, node, qual):
        if id(node) not in self.environ_ok and id(node) not in self.env_keyword:
            self.add("environment", qual, node, "reads every environment variable (tokens live there)")


def _drop_options(args):
    """`%timeit -n 10 -r 3 stmt` -> `stmt`."""
    words = args.split(" ")
    while words and words[0].startswith("-"):
        flag = words.pop(0)
        if len(flag) == 2 and flag[1] in "nrpo" and words and words[0].isdigit():
            words.pop(0)
    return " ".join(words).strip()


def _command_note(first):
    text = _literal(first)
    if isinstance(first, (ast.List, ast.Tuple)):
        parts = [_literal(e) for e in first.elts]
        text = " ".join(parts) if all(isinstance(p, str) for p in parts) else None
    return (": %s" % _cut(text)) if isinstance(text, str) and text.strip() else ""


def _url_note(first):
    text = _literal(first)
    return (" to %s" % _cut(text)) if isinstance(text, str) and URL.match(text) else ""


def _keyword(node, name):
    return next((k.value for k in node.keywords if k.arg == name), None)


def _index(node):
    s = node.slice
    return getattr(s, "value", s) if type(s).__name__ == "Index" else s  # ast.Index: Python 3.8


def _literal(node):
    return node.value if isinstance(node, ast.Constant) else None


def _in_modules(name, modules):
    return any(name == m or name.startswith(m + ".") for m in modules)


def _normal(name):
    """builtins.eval -> eval, posix.system -> os.system, io.open -> open."""
    for alias, real in (("builtins.", ""), ("posix.", "os."), ("nt.", "os."), ("io.open", "open")):
        if name.startswith(alias):
            return real + name[len(alias) :]
    return name


# ---- one question -----------------------------------------------------------------------------


def _scan_into(code, ctx, depth=0, line=None, mode="exec", offset=0, ipython=False):
    """Reads `code` into ctx.findings. `line`: code inside a literal, all of whose findings are at
    that line; `offset`: a cell magic's body, whose lines follow it; `ipython`: IPython's escapes apply."""
    scan = _Scan(ctx, depth, line)
    if ipython and depth == 0:
        m = _automagic(code)
        if m:
            return scan.magic(m)
    magics = []
    try:
        tree = ast.parse(code, "<code>", mode)
    except (SyntaxError, ValueError) as e:
        transformed = _escapes(code) if ipython else None
        try:
            if transformed is None:
                raise e
            source, magics = transformed
            tree = ast.parse(source, "<code>", mode)
        except (SyntaxError, ValueError) as why:
            at = line or offset + (getattr(why, "lineno", None) or 1)
            message = _cut(getattr(why, "msg", None) or str(why), 60)
            return ctx.findings.add("unreadable", "unreadable code", at, "the scan cannot read this code (%s), so it cannot say what it does" % message)
    if offset:
        ast.increment_lineno(tree, offset)
    for m in magics:
        m.line += offset
        scan.magic(m)
    scan.visit(tree)
    return None


_KNOWN_CACHE = {}


def _known_names(cells):
    """What the names imported or bound at the top of the notebook's cells stand for."""
    known = {}
    for code in cells:
        if not isinstance(code, str):
            continue
        if code not in _KNOWN_CACHE:
            ctx = _Context(None)
            ctx.known = {}
            scan = _Scan(ctx)
            try:
                tree = ast.parse(code)
            except (SyntaxError, ValueError):
                transformed = _escapes(code)
                try:
                    tree = ast.parse(transformed[0]) if transformed else None
                except (SyntaxError, ValueError):
                    tree = None
            for stmt in getattr(tree, "body", []):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    for alias in stmt.names:
                        if alias.name != "*":
                            module = getattr(stmt, "module", None)
                            top = alias.name.split(".")[0]
                            name = alias.asname or (alias.name if module else top)
                            qual = "%s.%s" % (module, alias.name) if module else (alias.name if alias.asname else top)
                            scan.aliases[name] = _normal(qual)
                elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    qual = scan.qual(stmt.value)
                    if qual:
                        scan.aliases[stmt.targets[0].id] = qual
            if len(_KNOWN_CACHE) > 4000:
                _KNOWN_CACHE.clear()
            _KNOWN_CACHE[code] = scan.aliases
        known.update(_KNOWN_CACHE[code])
    return known


def scan(code, cwd="", roots=(), home="", cells=()):
    """The findings of one piece of code, as the answer's dict."""
    ctx = _Context(_Places(cwd, roots, home), _known_names(cells))
    try:
        _scan_into(code, ctx, ipython=True)
    except (RecursionError, MemoryError):  # Python 3.8's parser runs out of stack as MemoryError
        ctx.findings.add("unreadable", "unreadable code", 1, "the code is nested too deeply for the scan to read, so it cannot say what it does")
    answer = {"findings": ctx.findings.items}
    if ctx.findings.omitted:
        answer["omitted"] = ctx.findings.omitted
    return answer


def _serve():
    for line in sys.stdin:
        if not line.strip():
            continue
        qid = None
        try:
            q = json.loads(line)
            qid = q.get("id")
            answer = scan(str(q.get("code") or ""), q.get("cwd") or "", q.get("roots") or [], q.get("home") or "", q.get("cells") or [])
        except Exception as e:  # every question is answered, whatever happened
            answer = {"failed": "%s: %s" % (type(e).__name__, _cut(str(e), 200))}
        answer["id"] = qid
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    # Deeply nested code (a 20,000-term sum) is read on a thread with room for its depth.
    sys.setrecursionlimit(60000)
    threading.stack_size(512 * 1024 * 1024)
    reader = threading.Thread(target=_serve, name="risk-scan")
    reader.start()
    reader.join()
