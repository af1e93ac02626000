"""Text the Agent Bridge builtin kernel gives people and agents, on its IPython and plain paths
alike (stdlib only; kernel.py loads it beside itself).

- Tables and arrays print TEXT_WIDTH characters wide. The kernel's stdout is a pipe, so pandas
  takes it for an 80-column terminal (display.max_columns 0: only the columns that fit) and
  numpy wraps at 75; an agent reading text/plain then misses most of a table. The options are
  set when pandas or numpy is first imported (an import hook), so neither is imported for this.
- IPython syntax (`%magic`, `!cmd`) on a Python without IPython fails with what to install.
"""

import sys

TEXT_WIDTH = 120


def _pandas(pd):
    pd.set_option("display.width", TEXT_WIDTH)
    if pd.get_option("display.max_columns") == 0:
        pd.set_option("display.max_columns", 20)  # pandas' own default outside a terminal, as in Jupyter


def _numpy(np):
    if np.get_printoptions().get("linewidth") == 75:
        np.set_printoptions(linewidth=TEXT_WIDTH)


_CONFIGURE = {"pandas": _pandas, "numpy": _numpy}


class _Loader(object):
    """The real loader of pandas or numpy, which configures the module once it has run."""

    def __init__(self, loader, configure):
        self._loader = loader
        self._configure = configure

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._configure(module)
        except Exception as e:  # a version without these options: its defaults stay
            sys.stderr.write("Agent Bridge could not widen %s's text: %s: %s\n" % (module.__name__, type(e).__name__, e))

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _WidthFinder(object):
    """First on sys.meta_path: wraps the loaders of pandas and numpy, then steps aside."""

    def __init__(self):
        self._finding = set()

    def find_spec(self, name, path=None, target=None):
        configure = _CONFIGURE.get(name)
        if configure is None or name in self._finding:
            return None
        import importlib.util

        self._finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.discard(name)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, configure)
        return spec


def widen_tables():
    sys.meta_path.insert(0, _WidthFinder())


def explain_ipython_syntax(code, error):
    """For a SyntaxError on a line of IPython syntax: a message saying what to install, else None."""
    lineno = getattr(error, "lineno", None)
    lines = code.splitlines()
    if not isinstance(lineno, int) or not 0 < lineno <= len(lines):
        return None
    line = lines[lineno - 1].strip()
    if not line.startswith(("%", "!")):
        return None
    python = sys.executable or "python3"
    return (
        "line %d, %r, is IPython syntax (a magic or a shell command), and this Python (%s) cannot import IPython. "
        "Install it for this Python (`%s -m pip install ipython`; for a Debian/Ubuntu system Python: "
        "`apt install python3-ipython`), then restart the kernel." % (lineno, line[:60], python, python)
    )
