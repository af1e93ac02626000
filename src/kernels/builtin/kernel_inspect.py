"""Reading a kernel's state and a notebook's code without running a cell (stdlib only, 3.8+).

Three queries, each answered with a JSON-able dict:
  {"kind":"variables"}                  the user's variables: name, type, shape or length, size, a short repr
  {"kind":"variable","name":str}        one variable: a longer repr; columns and dtypes of a DataFrame
  {"kind":"analyze","cells":[{"id","code"}],"ipython":bool}
                                        each cell's top-level definitions and the globals it uses (symtable
                                        and ast), or its syntax error with line and column

Every attribute of a user object (repr, len, shape, size) is read under a deadline and its text
capped: a `__repr__` that raises, loops or returns megabytes costs a note, never the answer.

Used three ways:
- by kernel.py, whose reader thread hands it {"op":"inspect","qid","query"}: `serve` answers on a
  thread of its own, so a cell that is running does not delay the answer, and the answer is sent
  after at most ANSWER_SECONDS even if some object's C code blocks;
- as a program exec'd in another kernel (Jupyter, marimo) through its scratchpad, with
  `_agent_bridge_query` (the query as JSON text) and `_agent_bridge_ns` in its globals: it
  prints MARKER + the JSON answer;
- as `python kernel_inspect.py`, reading one query from stdin and writing the answer to stdout
  (the analysis, for notebooks whose kernel is not ours).
"""

import ast
import builtins
import json
import sys
import threading
import time
import types

MARKER = "\x1eagent-bridge-inspect:"
REPR_CHARS = 200  # a listed variable's repr
DETAIL_CHARS = 4000  # an inspected variable's repr
ITEM_SECONDS = 0.5  # one attribute of one object (Python code: enforced by a trace function)
ANSWER_SECONDS = 4.0  # the whole answer (C code that blocks is left behind on its thread)
MAX_VARIABLES = 500
MAX_COLUMNS = 200
# Names IPython binds in every namespace: neither variables nor dependencies between cells.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "display"}


class _Timeout(Exception):
    pass


def _bounded(fn, seconds=ITEM_SECONDS):
    """fn() or ("error", text): raises are reported, Python code past its deadline is stopped."""
    deadline = time.monotonic() + seconds
    previous = sys.gettrace()

    def trace(frame, event, arg):
        if time.monotonic() > deadline:
            raise _Timeout()
        # Per opcode: `while True: pass` on one line makes no line events.
        frame.f_trace_opcodes = True
        return trace

    sys.settrace(trace)
    try:
        return fn(), None
    except _Timeout:
        return None, "took longer than %.1f s" % seconds
    except BaseException as e:  # a hostile __repr__ may raise anything, SystemExit included
        return None, "%s: %s" % (type(e).__name__, _cut(_safe_str(e), 200))
    finally:
        sys.settrace(previous)


def _safe_str(e):
    try:
        return str(e)
    except BaseException:
        return "(unprintable)"


def _cut(text, limit):
    if not isinstance(text, str):
        return ""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "\u2026"


def _type_name(value):
    t = type(value)
    module = getattr(t, "__module__", "")
    name = getattr(t, "__qualname__", t.__name__)
    return name if module in ("builtins", None, "") else "%s.%s" % (module, name)


def _is_variable(name, value, hidden):
    if name.startswith("_") or name in hidden:
        return False
    return not isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type))


def _describe(name, value, repr_chars):
    """What is known of one value without trusting it: each part read under its own deadline."""
    out = {"name": name, "type": _type_name(value)}
    shape, error = _bounded(lambda: getattr(value, "shape", None))
    if error is None and isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        out["shape"] = list(shape)
    elif hasattr(type(value), "__len__"):
        length, error = _bounded(lambda: len(value))
        if error is None:
            out["length"] = length
        else:
            out["lengthError"] = error
    size, error = _bounded(lambda: _size(value))
    if error is None and isinstance(size, int):
        out["size"] = size
    text, error = _bounded(lambda: repr(value))
    if error is None and isinstance(text, str):
        out["repr"] = _cut(text, repr_chars)
        if len(text) > repr_chars:
            out["reprTruncated"] = True
    else:
        out["repr"] = "<repr failed: %s>" % (error or "not a str")
        out["reprError"] = True
    return out


def _size(value):
    """Bytes in memory: a DataFrame's or array's own figure where it has one, else sys.getsizeof."""
    memory_usage = getattr(value, "memory_usage", None)
    if callable(memory_usage) and hasattr(value, "columns"):
        return int(memory_usage(index=True, deep=False).sum())
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return sys.getsizeof(value)


def _frame_detail(value):
    columns = list(value.columns)[:MAX_COLUMNS]
    dtypes = value.dtypes
    return {
        "columns": [{"name": _cut(str(c), 200), "dtype": str(dtypes[c]) if c in dtypes else None} for c in columns],
        "columnCount": len(value.columns),
    }


def variables(ns, hidden=(), budget=None):
    """The user's variables, sorted by name. `budget`: a deadline (monotonic); later ones are named only."""
    names = sorted(n for n, v in list(ns.items()) if _is_variable(n, v, hidden))
    listed = []
    for name in names[:MAX_VARIABLES]:
        if name not in ns:
            continue
        if budget is not None and time.monotonic() > budget:
            listed.append({"name": name, "type": _type_name(ns[name]), "skipped": "the answer's time budget ran out"})
        else:
            listed.append(_describe(name, ns[name], REPR_CHARS))
    answer = {"variables": listed}
    if len(names) > MAX_VARIABLES:
        answer["omitted"] = len(names) - MAX_VARIABLES
    return answer


def variable(ns, name):
    if name not in ns:
        return {"missing": name}
    value = ns[name]
    detail = _describe(name, value, DETAIL_CHARS)
    if hasattr(value, "columns") and hasattr(value, "dtypes"):
        frame, error = _bounded(lambda: _frame_detail(value), ITEM_SECONDS * 2)
        if error is None:
            detail.update(frame)
        else:
            detail["columnsError"] = error
    return {"variable": detail}


# ---- the analysis -----------------------------------------------------------------------------

def _transformer(ipython):
    """IPython's own input transformer (magics, `!`), loaded on first need: importing it is slow
    (SETUP.md, measured figures), and plain Python, which it leaves as it is, never needs it."""
    loaded = []

    def transform(code):
        if not ipython:
            return None
        if not loaded:
            try:
                from IPython.core.inputtransformer2 import TransformerManager

                loaded.append(TransformerManager())
            except Exception:
                loaded.append(None)
        if loaded[0] is None:
            return None
        try:
            return loaded[0].transform_cell(code)
        except Exception:
            return None

    return transform


def _syntax_error(e):
    line = getattr(e, "lineno", None) or 1
    col = getattr(e, "offset", None) or 1
    return {"message": getattr(e, "msg", None) or str(e), "line": line, "column": col, "text": _cut((getattr(e, "text", None) or "").rstrip("\n"), 200)}


def _globals_used(table, found):
    """Globals read inside functions, classes and comprehensions (scopes of their own)."""
    for child in table.get_children():
        for sym in child.get_symbols():
            if sym.is_referenced() and sym.is_global():
                found.add(sym.get_name())
        _globals_used(child, found)


def _first_statements(tree):
    """The statement (numbered in source order) where each name is first read, and first bound.
    A statement reads before it binds (`x = x + 1`, `x += 1`), so a read in the binding statement counts."""
    loads, stores = {}, {}
    counter = [0]
    augmented = set()

    def visit(node, number):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                counter[0] += 1
                visit(child, counter[0])
                continue
            if isinstance(child, ast.Name):
                into = loads if isinstance(child.ctx, ast.Load) else stores
                into.setdefault(child.id, number)
                if isinstance(node, ast.AugAssign):
                    loads.setdefault(child.id, number)
                    augmented.add(child.id)
            visit(child, number)

    visit(tree, 0)
    return loads, stores, augmented


def _parse(source):
    import symtable

    tree = ast.parse(source, "<cell>", "exec")
    compile(tree, "<cell>", "exec", flags=getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0), dont_inherit=True)
    return tree, symtable.symtable(source, "<cell>", "exec")


def analyze_cell(code, transform):
    try:
        tree, table = _parse(code)
    except (SyntaxError, ValueError) as e:
        # Not Python: maybe IPython (magics, `!`), which its transformer turns into Python.
        source = transform(code)
        try:
            if source is None or source == code:
                raise e
            tree, table = _parse(source)
        except (SyntaxError, ValueError):
            return {"error": _syntax_error(e)}  # reported on the person's own text
    defines, reads = set(), set()
    for sym in table.get_symbols():
        name = sym.get_name()
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            defines.add(name)
        if sym.is_referenced():
            reads.add(name)
    _globals_used(table, reads)
    loads, stores, augmented = _first_statements(tree)
    reads |= augmented  # symtable counts `x += 1` as a binding only
    # A name this cell binds is used from elsewhere only when it is read before it is bound.
    uses = {n for n in reads if n not in defines or (n in loads and loads[n] <= stores.get(n, loads[n]))}
    ignored = set(dir(builtins)) | _IPYTHON_NAMES
    return {"defines": sorted(defines - _IPYTHON_NAMES), "uses": sorted(uses - ignored)}


def analyze(cells, ipython):
    transform = _transformer(ipython)
    answer = []
    for cell in cells:
        code = cell.get("code") if isinstance(cell, dict) else None
        result = analyze_cell(code if isinstance(code, str) else "", transform)
        result["id"] = cell.get("id") if isinstance(cell, dict) else None
        answer.append(result)
    return {"cells": answer}


def answer(query, ns, hidden=(), budget=None):
    kind = query.get("kind") if isinstance(query, dict) else None
    if kind == "variables":
        return variables(ns, hidden, budget)
    if kind == "variable":
        return variable(ns, str(query.get("name")))
    if kind == "analyze":
        return analyze(query.get("cells") or [], bool(query.get("ipython")))
    return {"failed": "unknown query kind %r" % (kind,)}


# ---- kernel.py's side --------------------------------------------------------------------------

def serve(msg, ns, hidden, send, start_thread):
    """Answers one inspect request on a thread of its own, in at most ANSWER_SECONDS."""
    qid = msg.get("qid")
    query = msg.get("query")
    result = {}

    def work():
        try:
            result["value"] = answer(query, ns, hidden, time.monotonic() + ANSWER_SECONDS * 0.75)
        except BaseException as e:
            result["value"] = {"failed": "%s: %s" % (type(e).__name__, _cut(_safe_str(e), 500))}

    def reply():
        worker = threading.Thread(target=work, daemon=True, name="agent-bridge-inspect-work")
        start_thread(worker)
        worker.join(ANSWER_SECONDS)
        value = result.get("value")
        if value is None:
            value = {"failed": "reading the variables took longer than %.0f s (an object's code blocks)" % ANSWER_SECONDS}
        send({"type": "inspected", "qid": qid, "result": value})

    start_thread(threading.Thread(target=reply, daemon=True, name="agent-bridge-inspect"))


def _print_answer(query, ns):
    sys.stdout.write(MARKER + json.dumps(answer(query, ns, _IPYTHON_NAMES), default=str) + "\n")
    sys.stdout.flush()


if "_agent_bridge_query" in globals():  # exec'd in another kernel
    _print_answer(json.loads(globals()["_agent_bridge_query"]), globals()["_agent_bridge_ns"])
elif __name__ == "__main__":
    _print_answer(json.load(sys.stdin), {})
