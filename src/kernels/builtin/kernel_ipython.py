"""The IPython path of the Agent Bridge builtin kernel.

kernel.py loads this file when the kernel's Python can import IPython (importing it raises
ImportError otherwise, and the kernel stays plain Python). It wires IPython's InteractiveShell
the way ipykernel does, so notebooks run as they do in Jupyter, and speaks the kernel's protocol
through the hooks kernel.py hands over:

- cells run through `InteractiveShell.run_cell`: magics, `!cmd`, `display()`, the display
  formatter, `In`/`Out`/`_`, the execution count;
- a DisplayPublisher sends `display` messages (Jupyter's display_data); a DisplayHook sends the
  cell's value as a `display` with its `execution_count` (Jupyter's execute_result), when the
  value is computed, so a figure shown after the cell comes after it, as in Jupyter;
- figures are shown after each cell by matplotlib's inline backend (matplotlib_inline, as
  ipykernel sets it), or by kernel.py's own figure display where that package is missing;
- tracebacks are IPython's, without colours, and name a cell `Cell In[n]` by its execution count;
- scratchpad runs get the same syntax, but run in a shallow copy of the globals and are not
  cells: no execution count, no `In`/`Out`/`_` history, no figures left for the next cell.
"""

import ast
import os
import sys
import traceback
from importlib.util import find_spec

from IPython import __version__ as version
from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

_INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

_hooks = None  # set by Shell.start: the kernel's functions this module calls


class _Publisher(DisplayPublisher):
    """display() and friends: one `display` message each (Jupyter's display_data)."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        _hooks.display(data, metadata, None)


class _Hook(DisplayHook):
    """The cell's value: one `display` message with the execution count (Jupyter's execute_result)."""

    _data = None

    def start_displayhook(self):
        self._data = None

    def write_output_prompt(self):
        pass

    def write_format_data(self, format_dict, md_dict=None):
        self._data = (format_dict, md_dict)

    def finish_displayhook(self):
        if self._data is not None:
            _hooks.display(self._data[0], self._data[1], self.prompt_count)
            self._data = None


class _InteractiveShell(InteractiveShell):
    display_pub_class = _Publisher
    displayhook_class = _Hook

    def init_virtualenv(self):
        pass  # as ipykernel: the kernel runs the Python it was given, whatever VIRTUAL_ENV says

    def ask_exit(self):
        """exit() / quit(): the kernel serves the notebook until the person restarts or closes it."""
        sys.stderr.write("The Agent Bridge kernel keeps running: restart it with \"Agent Bridge: Restart Builtin Kernel\" (or POST /notebooks/restart).\n")

    def enable_gui(self, gui=None):
        if gui not in (None, "inline"):  # %matplotlib inline asks for no event loop
            raise RuntimeError("GUI event loops (%%gui, %%matplotlib %s) cannot run in the Agent Bridge kernel; use %%matplotlib inline" % gui)

    def showtraceback(self, exc_tuple=None, *args, **kwargs):
        tb = (exc_tuple or sys.exc_info())[2]
        if tb is not None:
            _hooks.trim_traceback(tb)  # an interrupt's last frame is the kernel's signal handler
        return super(_InteractiveShell, self).showtraceback(exc_tuple, *args, **kwargs)

    def _showtraceback(self, etype, evalue, stb):
        try:
            message = str(evalue)
        except Exception:
            message = ""
        _hooks.error(etype.__name__, message, "\n".join(stb) + "\n")


class Shell(object):
    """The kernel's IPython: run_cell for cells, run_scratchpad for scratchpad runs."""

    def __init__(self, user_module, hooks):
        global _hooks
        _hooks = hooks
        if find_spec("matplotlib_inline") is not None and os.environ.get("MPLBACKEND", "Agg") == "Agg":
            # Jupyter's default: figures appear after the cell. Agg is what the host sets for plain runs.
            os.environ["MPLBACKEND"] = _INLINE_BACKEND
        config = Config()
        config.HistoryManager.enabled = False  # no history.sqlite, no writer thread
        config.InteractiveShell.colors = "NoColor"  # tracebacks are read as text, by people and agents
        config.PlainTextFormatter.max_width = hooks.text_width  # IPython's 79 would wrap what pandas prints wider
        self.shell = _InteractiveShell.instance(config=config, user_module=user_module)
        # Top-level await on the kernel's loops: a cell nested in a host call of a cell that awaits
        # gets a loop of its own (IPython's one loop would be running already).
        self.shell.loop_runner = hooks.run_coroutine
        self.ns = self.shell.user_ns
        self.shell.set_hook("show_in_pager", _page, priority=10)
        # A huge str or bytes value keeps head and tail before repr, which would copy it whole.
        plain = self.shell.display_formatter.formatters["text/plain"]
        for kind in (str, bytes):
            plain.for_type(kind, lambda value, p, cycle: p.text(hooks.plain_repr(value)))
        if os.environ.get("MPLBACKEND") != _INLINE_BACKEND:
            self.shell.events.register("post_execute", hooks.show_figures)

    def run_cell(self, code, instrument=None):
        """Runs a cell like Jupyter (named `Cell In[n]` in tracebacks); returns (success, execution count or None for an empty cell).
        `instrument` takes the cell's syntax tree once IPython made it (kernel_dataflow.Record.instrument)."""
        shell = self.shell
        outer_ns, shell.user_ns = shell.user_ns, self.ns  # a cell nested in a scratchpad run binds globals
        transformer = _TreeHook(instrument) if instrument is not None else None
        if transformer is not None:
            shell.ast_transformers.append(transformer)
        try:
            result = shell.run_cell(code, store_history=True)
        finally:
            shell.user_ns = outer_ns
            if transformer in shell.ast_transformers:
                shell.ast_transformers.remove(transformer)
        return result.success, result.execution_count

    def run_scratchpad(self, code, filename, ns):
        """Runs code in `ns` (a copy of the globals) with IPython's syntax; returns (success, value bundle)."""
        shell = self.shell
        outer_ns, shell.user_ns = shell.user_ns, ns  # magics (%time x = 1) bind in the copy too
        figures = _FigureState()
        try:
            try:
                body, last = _hooks.compile(shell.transform_cell(code), filename)
            except Exception:
                shell.showtraceback()  # a SyntaxError is shown as IPython shows one in a cell
                return False, None
            try:
                with shell.builtin_trap:
                    if body is not None:
                        _hooks.run_code(body, ns)
                    value = _hooks.run_code(last, ns) if last is not None else None
            except UsageError as e:  # a magic misused or unknown: one line, as in a cell
                shell.show_usage_error(e)
                return False, None
            except BaseException as e:  # as in kernel.py: the kernel outlives SystemExit too
                tb = _hooks.own_frames(e.__traceback__, filename)
                _hooks.trim_traceback(tb)
                if isinstance(e, SyntaxError):  # code compiled at run time: show its line, as a cell would
                    stb = shell.SyntaxTB.structured_traceback(type(e), e, traceback.extract_tb(tb))
                else:
                    stb = shell.InteractiveTB.structured_traceback(type(e), e, tb, tb_offset=0)
                shell._showtraceback(type(e), e, stb)
                return False, None
            if value is None:
                return True, None
            data, _metadata = shell.display_formatter.format(value)
            return True, _hooks.bundle(data)
        finally:
            shell.user_ns = outer_ns
            figures.restore()


class _TreeHook(ast.NodeTransformer):
    """One of IPython's AST transformers that hands the cell's tree to a function."""

    def __init__(self, instrument):
        super(_TreeHook, self).__init__()
        self.instrument = instrument

    def visit(self, node):
        return self.instrument(node)


class _FigureState(object):
    """What pyplot and the inline backend hold before a scratchpad run, to put back after it."""

    def __init__(self):
        plt = sys.modules.get("matplotlib.pyplot")
        self.figures = set(plt.get_fignums()) if plt is not None else set()
        inline = sys.modules.get("matplotlib_inline.backend_inline")
        self.inline = (inline.show._draw_called, list(inline.show._to_draw)) if inline is not None else None

    def restore(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            for num in plt.get_fignums():
                if num not in self.figures:
                    plt.close(num)
        inline = sys.modules.get("matplotlib_inline.backend_inline")
        if inline is not None:
            draw_called, to_draw = self.inline or (False, [])
            inline.show._draw_called, inline.show._to_draw = draw_called, to_draw


def _page(shell, data, start=0, screen_lines=0, pager_cmd=None):
    """`obj?`, %pinfo, %pdoc: printed, as there is no pager to open."""
    text = data.get("text/plain", "") if isinstance(data, dict) else str(data)
    print(text)
