"""Agent Bridge builtin kernel: runs notebook code for the VS Code extension (stdlib only, 3.8+).

Started as `python -u kernel.py 3 4` (request fd, message fd). stdin is /dev/null, so input()
raises EOFError. This file is the runner: it compiles and runs each request to its `done`, nested
runs included, and sets the process up. It loads its parts from beside itself:
kernel_protocol.py speaks to the host (the messages, output streams, fds 1/2 of each run, host
calls) and owns the current run; kernel_values.py turns values into capped mime bundles.

When the Python can import IPython (and AGENT_BRIDGE_IPYTHON is not "0"), runs go through
IPython's InteractiveShell (kernel_ipython.py beside this file): a cell's value is then a
`display` with `execution_count` (Jupyter's execute_result), sent when it is computed, and its
`done` carries the cell's execution count; `value` is only used by scratchpad runs. Without
IPython, a cell's value is `done.value`, and `cell.count` is the cell run's execution count, which
names its code in tracebacks.

The code-mode module `agent_bridge` (agent_bridge.py beside this file) is importable in
scratchpad runs only, unless AGENT_BRIDGE_CODE_MODE_IN_CELLS=1 makes it importable in cells too.
"""

import sys

if sys.version_info < (3, 8):  # before the imports, which older Pythons may lack
    sys.stderr.write("The Agent Bridge kernel needs Python 3.8 or newer; this is %s.\n" % sys.version.split()[0])
    sys.exit(1)

import ast
import builtins
import json
import linecache
import os
import signal
import traceback
import types


def _load_beside(filename, name):
    """A module shipped beside this file, loaded under a private name (the user's modules keep theirs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), filename))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


try:
    _wire = _load_beside("kernel_protocol.py", "_agent_bridge_protocol")  # owns the current run and the lock
    _values = _load_beside("kernel_values.py", "_agent_bridge_values")
except FileNotFoundError as e:
    sys.stderr.write("The Agent Bridge kernel's %s is missing beside %s: reinstall the extension.\n" % (os.path.basename(e.filename or "?"), __file__))
    sys.exit(1)
# Frames of these files are the kernel's own: tracebacks show the code the person ran, not them.
_KERNEL_FILES = frozenset(f.__code__.co_filename for f in (_load_beside, _wire.send, _values.cut))

_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE; inspect is slow to import
_user_ns = {}
_loops = []  # asyncio loops of runs with top-level await; a nested run needs another than its caller's
_ipython = None  # kernel_ipython.Shell when runs go through IPython
_text = None  # kernel_text, when it is beside this file
_CODE_MODE = "agent_bridge"
_code_mode_in_cells = os.environ.get("AGENT_BRIDGE_CODE_MODE_IN_CELLS") == "1"
_code_mode_module = None
_inspect = None  # kernel_inspect: variables and the cells' analysis, answered beside the runs
_dataflow = None  # kernel_dataflow: what each cell run read and changed
# Names no cell's record lists: builtins, and those IPython binds in every namespace.
_IGNORED_NAMES = frozenset(dir(builtins)) | {"In", "Out", "get_ipython", "exit", "quit", "display"}


# ---- code mode ----------------------------------------------------------------------------------

class _CodeModeFinder(object):
    """Last on sys.meta_path: says why `import agent_bridge` fails where it is not offered."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != _CODE_MODE:
            return None
        if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_bridge.py")):
            raise ModuleNotFoundError("agent_bridge.py is missing beside the kernel (%s): reinstall the extension" % __file__, name=name)
        raise ModuleNotFoundError(
            "agent_bridge (Agent Bridge code mode) can be imported in scratchpad runs "
            "(POST /api/kernel/execute, MCP execute_code), not in notebook cells; the VS Code setting "
            "agentBridge.codeMode.inCells makes it importable in cells (restart the kernel after changing it).",
            name=name,
        )


def _load_code_mode():
    """agent_bridge.py, loaded once; None when it cannot be (a kernel.py copied without it)."""
    global _code_mode_module
    if _code_mode_module is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_bridge.py")
        if not os.path.exists(path):
            return None
        spec = importlib.util.spec_from_file_location(_CODE_MODE, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _code_mode_module = module
    return _code_mode_module


def _show_code_mode(visible):
    """Makes agent_bridge importable or not; returns what sys.modules held, for _restore_code_mode."""
    held = sys.modules.get(_CODE_MODE)
    if visible:
        if held is None:
            try:
                module = _load_code_mode()
            except Exception as e:
                _wire.stderr.write("agent_bridge could not be loaded: %s: %s\n" % (type(e).__name__, e))
                module = None
            if module is not None:
                sys.modules[_CODE_MODE] = module
    elif held is not None and held is _code_mode_module:
        del sys.modules[_CODE_MODE]
    return held


def _restore_code_mode(held):
    now = sys.modules.get(_CODE_MODE)
    if now is held:
        return
    if held is None:
        if now is _code_mode_module:
            del sys.modules[_CODE_MODE]
    elif now is None or now is _code_mode_module:
        sys.modules[_CODE_MODE] = held


# ---- running code -------------------------------------------------------------------------------

def _compile(code, filename, instrument=None):
    """Returns (body, trailing expression or None) code objects; either may be a coroutine.
    `instrument`: takes the syntax tree first (kernel_dataflow.Record.instrument)."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST | flags, dont_inherit=True)
    if instrument is not None:
        tree = instrument(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval", flags, dont_inherit=True)
    body = compile(tree, filename, "exec", flags, dont_inherit=True) if tree.body else None
    return body, last


def _run_code(code, ns):
    if code.co_flags & _CO_COROUTINE:
        return _run_coroutine(eval(code, ns))
    return eval(code, ns)


def _run_coroutine(coro):
    import asyncio  # only paid for by notebooks that await

    # A run nested in a host call of a run that awaits finds that run's loop running: it gets a
    # loop of its own, and the caller's is made current again afterwards.
    outer = asyncio._get_running_loop()
    loop = None
    for candidate in _loops:
        if not candidate.is_running() and not candidate.is_closed():
            loop = candidate
            break
    if loop is None:
        loop = asyncio.new_event_loop()
        _loops[:] = [l for l in _loops if not l.is_closed()] + [loop]
    if outer is not None:
        asyncio._set_running_loop(None)
    asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()  # let the interrupted coroutine run its cleanup now, not in the next run
            try:
                loop.run_until_complete(task)
            except BaseException:
                pass
        raise
    finally:
        if outer is not None:
            asyncio.set_event_loop(outer)
            asyncio._set_running_loop(outer)


def _own_frames_stripped(tb, filename):
    """Starts the traceback at the run's own code, hiding the kernel (and asyncio) frames."""
    t = tb
    while t is not None:
        if t.tb_frame.f_code.co_filename == filename:
            return _trim_kernel_tail(t)
        t = t.tb_next
    while tb is not None and tb.tb_frame.f_code.co_filename in _KERNEL_FILES:
        tb = tb.tb_next
    return tb


def _trim_kernel_tail(tb):
    """Cuts the kernel's own frames off the end of a traceback (an interrupt is raised in
    on_sigint, or in the writer that deferred it), so it ends in the code the person ran."""
    prev, t = None, tb
    while t is not None:
        own = t.tb_frame.f_code.co_filename in _KERNEL_FILES
        if own and prev is not None and prev.tb_frame.f_code.co_filename not in _KERNEL_FILES:
            prev.tb_next = None
            break
        prev, t = t, t.tb_next
    return tb


def _error_message(e, text):
    try:
        message = str(e)
    except Exception:
        message = ""
    return {"type": "error", "id": _wire.run_id, "name": type(e).__name__, "message": _values.cut(message), "traceback": _values.cut(text)}


def _run_ipython(code, filename, cell, ns, record):
    """Runs through IPython, which reports errors itself; returns (success, value, execution count)."""
    _wire.executing = True
    try:
        if cell:
            succeeded, execution_count = _ipython.run_cell(code, record.instrument if record is not None else None)
            return succeeded, None, execution_count
        succeeded, value = _ipython.run_scratchpad(code, filename, ns)
        return succeeded, value, None
    finally:
        _wire.executing = False


def _code_name(cell):
    """A cell's filename in tracebacks: `Cell In[n]`, n the execution count of its run, as IPython
    names a cell; the editor shows that count, the file saves it and the bridge's answers give it."""
    if isinstance(cell, dict) and isinstance(cell.get("count"), int):
        return "Cell In[%d]" % cell["count"]
    return "<cell>"


def _execute(req):
    """Runs one request to its `done`. Re-entrant: a run nested in a host call of another keeps
    its own id, streams and code-mode visibility, and gives the caller's back when it ends."""
    run_id = req.get("id")
    code = req.get("code")
    if not isinstance(code, str):
        code = ""
    cell = req.get("mode") != "scratchpad"
    filename = _code_name(req.get("cell")) if cell else "<scratchpad>"
    outer = _wire.enter_run(run_id)
    # One name per counted cell run (as IPython keeps each In[n]), one for the scratchpad, replaced each run.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    code_mode_held = _show_code_mode(not cell or _code_mode_in_cells)
    # Scratchpad: a shallow copy, so new bindings vanish but mutated objects stay mutated.
    ns = _user_ns if cell else dict(_user_ns)
    value = None
    error = None
    compiled = False
    succeeded = True  # False when IPython reported the failure itself
    execution_count = None
    if _dataflow is not None:
        _dataflow.started()
    record = _begin_record(ns) if cell else None
    try:
        if _ipython is not None:
            succeeded, value, execution_count = _run_ipython(code, filename, cell, ns, record)
        else:
            body, last = _compile(code, filename, record.instrument if record is not None else None)
            compiled = True
            _wire.executing = True
            try:
                if body is not None:
                    _run_code(body, ns)
                if last is not None:
                    result = _run_code(last, ns)
                    if result is not None:
                        if cell:
                            ns["_"] = result
                        value = _values.mimebundle(result)
                _show_figures()
            finally:
                _wire.executing = False
    except BaseException as e:  # the kernel outlives everything user code does, SystemExit included
        if compiled:
            tb = _own_frames_stripped(e.__traceback__, filename)
            text = "".join(traceback.format_exception(type(e), e, tb))
        else:
            text = "".join(traceback.format_exception_only(type(e), e))
        error = _error_message(e, text)
        hint = _text.explain_ipython_syntax(code, e) if _text is not None and isinstance(e, SyntaxError) else None
        if hint:
            error["message"], error["traceback"] = hint, text + hint + "\n"
    _restore_code_mode(code_mode_held)
    if error is not None:
        _wire.send(error)
    done = {"type": "done", "id": run_id, "success": succeeded and error is None, "value": value}
    if execution_count is not None:
        done["execution_count"] = execution_count
    dataflow = _end_record(record, ns)
    if dataflow is not None:
        done["dataflow"] = dataflow
    _wire.finish_run(outer, done)


def _begin_record(ns):
    """A cell run's record of what it reads and changes (kernel_dataflow.py); None without it."""
    if _dataflow is None or _inspect is None:
        return None
    try:
        record = _dataflow.Record(_inspect.Flow, _IGNORED_NAMES | set(_hidden_names()))
        record.begin(ns)
        return record
    except Exception as e:
        _wire.stderr.write("Agent Bridge: the run's record of its names failed (%s: %s)\n" % (type(e).__name__, e))
        return None


def _end_record(record, ns):
    if record is None:
        return None
    try:
        return record.end(ns)
    except Exception as e:
        _wire.stderr.write("Agent Bridge: the run's record of its names failed (%s: %s)\n" % (type(e).__name__, e))
        return None


def _send_display(formatted, metadata=None, execution_count=None):
    """IPython's display_data / execute_result, within the output caps."""
    msg = {"type": "display", "id": _wire.run_id, "data": _values.capped(_values.string_bundle(formatted))}
    if metadata:
        try:
            json.dumps(metadata)
            msg["metadata"] = metadata
        except (TypeError, ValueError):
            pass  # metadata only tunes the rendering: an output without it is still whole
    if execution_count is not None:
        msg["execution_count"] = execution_count
    _wire.send(msg)


def _show_figures():
    for data in _values.figures(_wire.stderr.write):
        _wire.send({"type": "display", "id": _wire.run_id, "data": data})


# ---- process setup ------------------------------------------------------------------------------

def _setup_user_namespace():
    # A real __main__ module holds the user's globals, so pickle and friends find what cells define.
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "__loader__": None, "__spec__": None, "__package__": None})
    sys.modules["__main__"] = main
    return main.__dict__


def _start_ipython():
    """Readable tables on both paths; IPython's shell when this Python has IPython."""
    global _ipython, _text, _inspect, _dataflow
    try:
        _inspect = _load_beside("kernel_inspect.py", "_agent_bridge_inspect")
        _dataflow = _load_beside("kernel_dataflow.py", "_agent_bridge_dataflow")
    except Exception as e:
        _wire.stderr.write("Agent Bridge: kernel_inspect.py or kernel_dataflow.py could not be loaded (%s: %s)\n" % (type(e).__name__, e))
    try:
        _text = _load_beside("kernel_text.py", "_agent_bridge_text")
        _text.widen_tables()
    except Exception as e:
        _text = None
        _wire.stderr.write("Agent Bridge: kernel_text.py could not be loaded (%s: %s)\n" % (type(e).__name__, e))
    if os.environ.get("AGENT_BRIDGE_IPYTHON") == "0":
        return
    try:
        module = _load_beside("kernel_ipython.py", "_agent_bridge_ipython")
    except ImportError as e:
        if getattr(e, "name", None) != "IPython":  # IPython is there but broken: say so
            _wire.stderr.write("Agent Bridge: IPython could not be imported, running plain Python (%s)\n" % e)
        return
    except Exception as e:
        _wire.stderr.write("Agent Bridge: IPython could not be loaded, running plain Python (%s: %s)\n" % (type(e).__name__, e))
        return
    hooks = types.SimpleNamespace(
        display=_send_display,
        error=lambda name, message, text: _wire.send({"type": "error", "id": _wire.run_id, "name": name, "message": _values.cut(message), "traceback": _values.cut(text)}),
        show_figures=_show_figures,
        trim_traceback=_trim_kernel_tail,
        own_frames=_own_frames_stripped,
        compile=_compile,
        run_code=_run_code,
        run_coroutine=_run_coroutine,
        bundle=lambda formatted: _values.capped(_values.string_bundle(formatted)),
        plain_repr=_values.plain_repr,
        text_width=_text.TEXT_WIDTH if _text is not None else 120,
    )
    try:
        _ipython = module.Shell(sys.modules["__main__"], hooks)
    except Exception as e:
        _wire.stderr.write("Agent Bridge: IPython could not be started, running plain Python (%s: %s)\n" % (type(e).__name__, e))


def _hidden_names():
    """Names the shell binds for itself (In, Out, exit...): not the user's variables."""
    return getattr(getattr(_ipython, "shell", None), "user_ns_hidden", None) or ()


def _answer_inspect(msg):
    """An inspect request, answered on a thread of its own beside the runs (kernel_inspect.py)."""
    _inspect.serve(msg, _user_ns, _hidden_names(), _wire.send, _wire.start_untagged)


def main(argv):
    global _user_ns
    req_fd, msg_fd = int(argv[1]), int(argv[2])
    for fd in (req_fd, msg_fd):
        os.set_inheritable(fd, False)  # os.system() children must not hold the protocol pipes open
    idle_fds = _wire.open_channel(msg_fd)
    try:
        import faulthandler

        # The host's stderr, not the run's pipe (whose reader dies with the kernel): a segfault
        # leaves a Python traceback in the stderr tail the host reports.
        faulthandler.enable(file=idle_fds[1] if idle_fds else sys.__stderr__)
    except Exception:
        pass
    sys.argv = [""]
    # Like `python -c`: modules next to the notebook (the cwd) import, not those next to us.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    sys.path.insert(0, "")
    _user_ns = _setup_user_namespace()
    _wire.install_host_module()
    sys.meta_path.append(_CodeModeFinder)
    sys.stdout, sys.stderr = _wire.stdout, _wire.stderr
    _start_ipython()
    signal.signal(signal.SIGINT, _wire.on_sigint)
    ipython = getattr(sys.modules.get("_agent_bridge_ipython"), "version", None) if _ipython is not None else None
    ready = {"type": "ready", "pid": os.getpid(), "python": "%d.%d.%d" % sys.version_info[:3], "ipython": ipython}
    _wire.serve(req_fd, ready, _execute, _answer_inspect if _inspect is not None else None)


if __name__ == "__main__":
    main(sys.argv)
