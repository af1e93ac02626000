"""Reading a kernel's state and a notebook's code without running a cell (stdlib only, 3.8+).

Three queries, each answered with a JSON-able dict:
  {"kind":"variables"}                  the user's variables: name, type, shape or length, size, a short repr
  {"kind":"variable","name":str}        one variable: a longer repr; columns and dtypes of a DataFrame
  {"kind":"analyze","cells":[{"id","code"}],"ipython":bool}
                                        each cell's top-level definitions and the globals it uses (symtable
                                        and ast), or its syntax error with line and column; a cell that
                                        cannot be analysed (nested too deeply, say) says so, alone

Reading a user object runs its code (repr, len, shape, size): each such read is one item, under a
deadline that a watchdog thread keeps. Past it the watchdog raises _Timeout in the reading thread
(CPython's PyThreadState_SetAsyncExc), which stops Python code at its next bytecode even when it
switched tracing off; the item is answered `"repr": null, "reprError": "took longer than 0.5 s"`,
and lists in the next minute skip that part of objects of that type. C code that blocks cannot be stopped:
the reader is then stuck in it, and says so. Every field is capped (text, names, shape, numbers),
and only str names are variables.

Used three ways:
- by kernel.py, whose reader thread hands it {"op":"inspect","qid","query"}: `serve` queues it for
  the kernel's one inspect worker, so a cell that is running does not delay the answer; a worker
  stuck in C code is named in the answer it was making (sent after STUCK_SECONDS) and in every
  answer while it stays stuck, and no other thread is started;
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
NAME_CHARS = 200  # a name, a type's name, a column's name, an error's message
SHAPE_DIMS = 32  # dimensions of a shape given (numpy allows 64)
ITEM_SECONDS = 0.5  # one read of one object (its repr, len, shape or size)
STUCK_SECONDS = 2.0  # a read still running this long did not stop when told: the reader is stuck in it
ANSWER_SECONDS = 4.0  # a list's reads; later variables are named only
MAX_VARIABLES = 500
MAX_COLUMNS = 200
SLOW_PARTS = 1000  # (type, part) pairs remembered as too slow to read again
SLOW_SKIP_SECONDS = 60.0  # ... for this long: a repr slow once on a loaded machine is tried again later
_LARGEST = 2 ** 63  # numbers past it are left out (JSON readers, and Python's own int-to-text limit)
# Names IPython binds in every namespace: neither variables nor dependencies between cells.
_IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "display"}
_NOT_VARIABLES = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)


class _Timeout(BaseException):
    """Raised in the reading thread by the watchdog. Not an Exception: `except Exception` in the
    code being read does not swallow it."""


def _async_raiser():
    """CPython's PyThreadState_SetAsyncExc(thread id, exception class or None to clear), or None
    where this Python has no ctypes (reads then run to their end)."""
    try:
        import ctypes

        call = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(("PyThreadState_SetAsyncExc", ctypes.pythonapi))
    except Exception:
        return None

    def raise_in(thread_id, exception):
        call(thread_id, exception if exception is not None else ctypes.py_object())

    return raise_in


class _Item:
    """One read under way: of which part of which variable, on which thread, until when."""

    def __init__(self, name, part, value, seconds):
        self.name = _cut(name, NAME_CHARS)
        self.part = part
        self.type = _type_name(value)
        self.thread = threading.get_ident()
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        self.fired = False


class Reader:
    """Reads user objects on the calling thread, one item at a time, each under a deadline its
    watchdog thread keeps (started on first use, asleep while no item is read). `on_stuck(item)`
    is called on the watchdog's thread when an item runs STUCK_SECONDS past its deadline."""

    def __init__(self, start_thread, on_stuck=None):
        self._start_thread = start_thread
        self._on_stuck = on_stuck
        self._cond = threading.Condition()
        self._item = None
        self._watchdog = None
        self._closed = False
        self._raise = _async_raiser()
        self._slow = {}  # (type, part) -> (skipped until, the note a skipped read gets)
        self.stuck = None  # the item the reader is stuck in, while it is

    def read(self, name, value, part, fn, seconds=ITEM_SECONDS, retry=False):
        """(fn(), None), or (None, why): it raised, took longer than `seconds`, or its type's
        `part` did before (unless `retry`)."""
        key = (type(value), part)
        slow = self._slow.get(key)
        if slow is not None and not retry and time.monotonic() < slow[0]:
            return None, slow[1]
        item = _Item(name, part, value, seconds)
        try:
            try:
                with self._cond:
                    self._item = item
                    self._watch()
                    self._cond.notify_all()
                return _guarded(fn)
            finally:
                self._done(item)
        except _Timeout:
            self._done(item)  # the interrupt may land in the finally above, before it ran
            if key in self._slow or len(self._slow) < SLOW_PARTS:
                note = "skipped: reading the %s of a %s took longer than %.1f s before" % (part, _type_name(value), seconds)
                self._slow[key] = (time.monotonic() + SLOW_SKIP_SECONDS, note)
            return None, "took longer than %.1f s" % seconds

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _done(self, item):
        """Ends `item`; called again when the interrupt landed inside the first call, which then left some undone."""
        with self._cond:
            if self.stuck is item:
                self.stuck = None
            if self._item is item:
                self._item = None
                if item.fired and self._raise is not None:
                    self._raise(item.thread, None)  # an interrupt not yet delivered is dropped
            self._cond.notify_all()

    def _watch(self):
        if self._watchdog is None and self._raise is not None:
            self._watchdog = threading.Thread(target=self._keep_deadlines, daemon=True, name="agent-bridge-inspect-watchdog")
            self._start_thread(self._watchdog)

    def _keep_deadlines(self):
        while True:
            stuck = None
            with self._cond:
                item = self._item
                if self._closed:
                    return
                if item is None or item is self.stuck:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                if not item.fired and now >= item.deadline:
                    item.fired = True
                    self._raise(item.thread, _Timeout)
                if item.fired and now >= item.deadline + STUCK_SECONDS:
                    self.stuck = stuck = item
                else:
                    self._cond.wait((item.deadline + (STUCK_SECONDS if item.fired else 0)) - now)
            if stuck is not None and self._on_stuck is not None:
                self._on_stuck(stuck)


def _guarded(fn):
    """(fn(), None) or (None, what it raised): the message is read under the same deadline."""
    try:
        return fn(), None
    except _Timeout:
        raise
    except BaseException as e:  # a hostile __repr__ may raise anything, SystemExit included
        return None, "%s: %s" % (_type_name(e), _cut(_safe_str(e), NAME_CHARS))


def _safe_str(e):
    try:
        return str.__str__(str(e))
    except _Timeout:
        raise
    except BaseException:
        return "(unprintable)"


def _cut(text, limit):
    if not isinstance(text, str):
        return ""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "\u2026"


def _type_name(value):
    """The type's module and qualified name, read from the type itself (a metaclass runs no code)."""
    t = type(value)
    try:
        module = type.__dict__["__module__"].__get__(t)
        name = type.__dict__["__qualname__"].__get__(t)
    except Exception:
        return "?"
    name = _cut(name, NAME_CHARS) if type(name) is str else "?"
    return name if type(module) is not str or module in ("builtins", "") else "%s.%s" % (_cut(module, NAME_CHARS), name)


def _small_int(n):
    return type(n) is int and -_LARGEST < n < _LARGEST


def _is_variable(name, value, hidden):
    if type(name) is not str or name.startswith("_") or name in hidden:
        return False
    return not issubclass(type(value), _NOT_VARIABLES)


def _shape(value):
    shape = getattr(value, "shape", None)
    if type(shape) is tuple and all(_small_int(n) for n in shape[:SHAPE_DIMS]):
        return list(shape[:SHAPE_DIMS]), len(shape)
    return None


def _length(value):
    return len(value) if hasattr(type(value), "__len__") else None


def _repr(value):
    return str.__str__(repr(value))  # a str subclass's own methods do not run on it


def _describe(reader, name, value, repr_chars, retry=False):
    """What is known of one value without trusting it: each part one read under its own deadline."""
    out = {"name": _cut(name, NAME_CHARS), "type": _type_name(value)}
    shape, error = reader.read(name, value, "shape", lambda: _shape(value), retry=retry)
    if shape is not None:
        out["shape"] = shape[0]
        if shape[1] > SHAPE_DIMS:
            out["shapeDims"] = shape[1]
    else:
        length, error = reader.read(name, value, "len", lambda: _length(value), retry=retry)
        if error is not None:
            out["lengthError"] = error
        elif _small_int(length):
            out["length"] = length
    size, error = reader.read(name, value, "size", lambda: _size(value), retry=retry)
    if error is None and _small_int(size):
        out["size"] = size
    text, error = reader.read(name, value, "repr", lambda: _repr(value), retry=retry)
    if error is None:
        out["repr"] = _cut(text, repr_chars)
        if len(text) > repr_chars:
            out["reprTruncated"] = True
    else:
        out["repr"] = None
        out["reprError"] = error
    return out


def _size(value):
    """Bytes in memory: a DataFrame's or array's own figure where it has one, else sys.getsizeof."""
    memory_usage = getattr(value, "memory_usage", None)
    if callable(memory_usage) and hasattr(value, "columns"):
        return int(memory_usage(index=True, deep=False).sum())
    nbytes = getattr(value, "nbytes", None)
    if _small_int(nbytes):
        return nbytes
    return sys.getsizeof(value)


def _frame_detail(value):
    if not (hasattr(value, "columns") and hasattr(value, "dtypes")):
        return None
    columns = list(value.columns)[:MAX_COLUMNS]
    dtypes = value.dtypes
    count = len(value.columns)
    return {
        "columns": [{"name": _cut(str(c), NAME_CHARS), "dtype": _cut(str(dtypes[c]), NAME_CHARS) if c in dtypes else None} for c in columns],
        "columnCount": count if _small_int(count) else None,
    }


def _names(ns, hidden):
    """The user's variables by name, sorted: str names only (others are not variables, and sort with none)."""
    return sorted(n for n, v in list(ns.items()) if _is_variable(n, v, hidden))


def variables(ns, hidden=(), budget=None, reader=None, listing=None):
    """The user's variables, sorted by name. `budget`: a deadline (monotonic); later ones are named
    only. `listing` (a dict) is kept up to date as they are read: what a stuck reader answers with."""
    names = _names(ns, hidden)
    listed = []
    if listing is not None:
        listing.update(names=names[:MAX_VARIABLES], listed=listed, at=0)
    for at, name in enumerate(names[:MAX_VARIABLES]):
        if listing is not None:
            listing["at"] = at
        if name not in ns:
            listed.append({"name": _cut(name, NAME_CHARS), "skipped": "deleted while the variables were read"})
        elif budget is not None and time.monotonic() > budget:
            listed.append({"name": _cut(name, NAME_CHARS), "type": _type_name(ns[name]), "skipped": "the answer's time budget ran out"})
        else:
            listed.append(_describe(reader, name, ns[name], REPR_CHARS))
    answer = {"variables": listed}
    if len(names) > MAX_VARIABLES:
        answer["omitted"] = len(names) - MAX_VARIABLES
    return answer


def variable(ns, name, reader):
    if type(name) is not str or name not in ns:
        return {"missing": name}
    value = ns[name]
    # Asked for by name: a part its type was too slow for before is tried again.
    detail = _describe(reader, name, value, DETAIL_CHARS, retry=True)
    frame, error = reader.read(name, value, "columns", lambda: _frame_detail(value), ITEM_SECONDS * 2, retry=True)
    if frame is not None:
        detail.update(frame)
    elif error is not None:
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
        result = _analyze_alone(code if isinstance(code, str) else "", transform)
        result["id"] = cell.get("id") if isinstance(cell, dict) else None
        answer.append(result)
    return {"cells": answer}


def _analyze_alone(code, transform):
    """One cell's analysis; a cell the parser cannot take (nested too deeply, too large) says so,
    and the others' analyses stand: a check that cannot be made is never a cell without names."""
    try:
        return analyze_cell(code, transform)
    except RecursionError:
        return {"unchecked": "too deeply nested to check"}
    except MemoryError:
        return {"unchecked": "too large to check"}
    except Exception as e:
        return {"unchecked": "could not be checked (%s: %s)" % (type(e).__name__, _cut(_safe_str(e), NAME_CHARS))}


def answer(query, ns, hidden=(), budget=None, reader=None, listing=None):
    kind = query.get("kind") if isinstance(query, dict) else None
    if kind == "variables":
        return variables(ns, hidden, budget, reader, listing)
    if kind == "variable":
        return variable(ns, query.get("name"), reader)
    if kind == "analyze":
        return analyze(query.get("cells") or [], bool(query.get("ipython")))
    return {"failed": "unknown query kind %r" % (kind,)}


# ---- kernel.py's side --------------------------------------------------------------------------

class _Worker:
    """The kernel's one inspect worker: answers queries in turn on its own thread, beside the runs.
    Stuck in code that does not stop, it is named by the answer it was making (what it listed so
    far, then the rest as skipped) and by every request until it is free; no other thread starts."""

    def __init__(self, send, start_thread):
        import queue

        self._send = send
        self._queue = queue.Queue()
        self._lock = threading.Lock()
        self._current = None  # the request under way: {"qid", "kind", "listing", "sent"}
        self.reader = Reader(start_thread, self._stuck)
        start_thread(threading.Thread(target=self._work, daemon=True, name="agent-bridge-inspect"))

    def ask(self, msg, ns, hidden):
        stuck = self.reader.stuck
        if stuck is not None:
            self._send({"type": "inspected", "qid": msg.get("qid"), "result": {"failed": _stuck_note(stuck)}})
        else:
            self._queue.put((msg, ns, hidden))

    def _work(self):
        while True:
            msg, ns, hidden = self._queue.get()
            query = msg.get("query")
            request = {"qid": msg.get("qid"), "kind": query.get("kind") if isinstance(query, dict) else None, "listing": {"ns": ns}, "sent": False}
            with self._lock:
                self._current = request
            try:
                value = answer(query, ns, hidden, time.monotonic() + ANSWER_SECONDS * 0.75, self.reader, request["listing"])
            except BaseException as e:
                value = {"failed": "%s: %s" % (_type_name(e), _cut(_safe_str(e), 500))}
            self._reply(request, value)

    def _reply(self, request, value):
        with self._lock:
            if request["sent"]:
                return
            request["sent"] = True
            if self._current is request:
                self._current = None
        self._send({"type": "inspected", "qid": request["qid"], "result": value})

    def _stuck(self, item):
        """On the watchdog's thread: the request under way is answered with what it has, and those waiting are told."""
        note = _stuck_note(item)
        with self._lock:
            request = self._current
        if request is not None:
            listing = request["listing"]
            if request["kind"] == "variables" and "names" in listing:
                self._reply(request, _stuck_list(listing, item, note))
            else:
                self._reply(request, {"failed": note})
        while not self._queue.empty():
            msg = self._queue.get_nowait()[0]
            self._send({"type": "inspected", "qid": msg.get("qid"), "result": {"failed": note}})


def _stuck_note(item):
    return (
        "the kernel's inspector is stuck reading the %s of `%s` (%s) for %.0f s: its code did not stop when "
        "interrupted (C code that blocks, or code that catches every exception); restart the kernel to end it"
        % (item.part, item.name, item.type, time.monotonic() - item.started)
    )


def _stuck_list(listing, item, note):
    """The variables listed before the reader got stuck, the one it is stuck in, then the rest named only."""
    listed = list(listing["listed"])[: listing["at"]]
    ns = listing["ns"]
    for name in listing["names"][listing["at"] :]:
        entry = {"name": _cut(name, NAME_CHARS), "type": _type_name(ns.get(name))}
        if name == item.name:
            entry.update({"repr": None, "reprError": "took longer than %.1f s and did not stop: %s" % (ITEM_SECONDS, note)})
        else:
            entry["skipped"] = note
        listed.append(entry)
    return {"variables": listed, "stuck": note}


_worker = None


def serve(msg, ns, hidden, send, start_thread):
    """Answers one inspect request through the kernel's one worker (made on the first request)."""
    global _worker
    if _worker is None:
        _worker = _Worker(send, start_thread)
    _worker.ask(msg, ns, hidden)


def _print_answer(query, ns):
    reader = Reader(lambda thread: thread.start())
    try:
        result = answer(query, ns, _IPYTHON_NAMES, time.monotonic() + ANSWER_SECONDS * 0.75, reader)
    finally:
        reader.close()
    sys.stdout.write(MARKER + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


if "_agent_bridge_query" in globals():  # exec'd in another kernel
    _print_answer(json.loads(globals()["_agent_bridge_query"]), globals()["_agent_bridge_ns"])
elif __name__ == "__main__":
    _print_answer(json.load(sys.stdin), {})
