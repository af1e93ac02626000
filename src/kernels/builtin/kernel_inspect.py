"""Reading a kernel's state and a notebook's code without running a cell (stdlib only, 3.8+).

Three queries, each answered with a JSON-able dict:
  {"kind":"variables"}                  the user's variables: name, type, shape or length, size, a short repr
  {"kind":"variable","name":str}        one variable: a longer repr; columns and dtypes of a DataFrame
  {"kind":"analyze","cells":[{"id","code"}],"ipython":bool}
                                        each cell's top-level definitions, the globals it uses and those it
                                        changes in place ("mutates": name, how), the names it imports
                                        (symtable and ast, `Flow`), or its syntax error with line and column;
                                        a cell that cannot be analysed (nested too deeply, say) says so, alone

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
- as `python kernel_inspect.py`, reading one query from stdin and writing the answer to stdout;
  with `--serve`, a query a line, each answered on a line of its own until stdin ends (the
  analysis, for notebooks whose kernel is not ours, by a process the bridge keeps while it is
  used). `--serve KIB` exits after an answer once the process has used KIB KiB of memory (peak
  resident): the bridge starts another for the next query.
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


# Methods that change the object they are called on (list, dict, set; pandas' and others' alike).
_MUTATING_METHODS = frozenset(
    (
        "append", "extend", "insert", "pop", "popitem", "remove", "clear", "sort", "reverse",
        "update", "setdefault", "add", "discard",
        "difference_update", "intersection_update", "symmetric_difference_update",
    )
)
_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_FORM_CHARS = 60


def _root(node):
    """The name at the root of `x`, `x.a`, `x[0].b`: changing any of them changes x. None for `f().a`."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound_inside(node):
    """Names a nested scope (and the scopes in it) binds for itself: not globals when read there."""
    bound, declared = set(), set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and not isinstance(inner.ctx, ast.Load):
            bound.add(inner.id)
        elif isinstance(inner, ast.arg):
            bound.add(inner.arg)
        elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and inner is not node:
            bound.add(inner.name)
        elif isinstance(inner, (ast.Import, ast.ImportFrom)):
            bound.update(_imported(inner))
        elif isinstance(inner, ast.ExceptHandler) and inner.name:
            bound.add(inner.name)
        elif isinstance(inner, ast.Global):
            declared.update(inner.names)
    return bound - declared


def _imported(node):
    return [(a.asname or a.name.split(".")[0]) for a in node.names if a.name != "*"]


class Flow(object):
    """A cell's top-level names, statement by statement, each in the block it runs in.

    Block 0 always runs; the body of an `if`/`else`, of an `except`, of a `case` or of a loop's
    `else` is a block of its own, which a run may skip. A loop's body belongs to the loop's block,
    and so does every block inside it: a mark there would cost each iteration. Events are (statement number, block, kind, name), kind
    "load", "store" or "mutate": a mutation is a subscript or attribute assignment or `del`, an
    augmented assignment of one, a call of a known mutating method, or any call with
    `inplace=True`, on a name or something reached from it (`df['c'] = ...`, `df.a.append(1)`).
    Globals read inside functions, lambdas, classes and comprehensions count as read by the
    statement that makes them; what a function body changes is not known until it is called.

    The cell's analysis sums every block; a run's record (kernel_dataflow.py) sums the blocks the
    run reached, which it learns from a mark set at the start of each block (`entries`).
    """

    def __init__(self, tree, source=None):
        self.source = source
        self.events = []
        self.forms = {}  # name -> how it is first changed in place or updated ("df['c'] = \u2026")
        self.methods = set()  # names changed by a mutating method called on the name itself (`np.append(...)` too)
        self.others = set()  # names changed in place some other way
        self.updates = set()  # names an augmented assignment rebinds (`x += 1`)
        self.imports = set()
        self.entries = []  # (statement list, block) of every block but 0
        self._number = 0
        self._blocks = 1
        self._loops = 0  # loop bodies the walk is in
        self._body(tree.body, 0)

    def summary(self, reached=None):
        """(reads, stores, mutates) over the blocks in `reached` (None: all). A name is read from
        outside the cell when it is read before the cell binds it (`x = x + 1` reads it); a
        mutation of a name the cell bound before changes the cell's own object."""
        first = ({}, {}, {})
        for number, block, kind, name in self.events:
            if reached is None or block in reached:
                first[("load", "store", "mutate").index(kind)].setdefault(name, number)
        loads, stores, mutated = first
        mutates = {n for n, at in mutated.items() if n not in stores or at <= stores[n]}
        reads = {n for n, at in loads.items() if n not in stores or at <= stores[n]} | mutates
        return reads, set(stores), mutates

    def _event(self, number, block, kind, name):
        self.events.append((number, block, kind, name))

    def _block(self, statements, parent):
        if self._loops:
            return parent
        block = self._blocks
        self._blocks += 1
        self.entries.append((statements, block))
        return block

    def _body(self, statements, block):
        # Statement k is numbered 2k; 2k + 1 is what it defers (a function body reads after the binding).
        for statement in statements:
            self._number += 1
            self._statement(statement, 2 * self._number, block)

    def _statement(self, s, n, block):
        if isinstance(s, ast.If):
            self._expr(s.test, n, block)
            self._body(s.body, self._block(s.body, block))
            if s.orelse:
                self._body(s.orelse, self._block(s.orelse, block))
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, ast.While):
                self._expr(s.test, n, block)
            else:
                self._expr(s.iter, n, block)
                self._target(s.target, n, block, "for %s in \u2026")
            self._loops += 1
            self._body(s.body, block)
            self._loops -= 1
            if s.orelse:
                self._body(s.orelse, self._block(s.orelse, block))
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self._expr(item.context_expr, n, block)
                if item.optional_vars is not None:
                    self._target(item.optional_vars, n, block, "with \u2026 as %s")
            self._body(s.body, block)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            self._body(s.body, block)
            for handler in s.handlers:
                inner = self._block(handler.body, block)
                if handler.type is not None:
                    self._expr(handler.type, n, block)
                if handler.name:
                    self._event(n, inner, "store", handler.name)
                self._body(handler.body, inner)
            if s.orelse:
                self._body(s.orelse, self._block(s.orelse, block))
            self._body(s.finalbody, block)
        elif type(s).__name__ == "Match":
            self._expr(s.subject, n, block)
            for case in s.cases:
                inner = self._block(case.body, block)
                for node in ast.walk(case.pattern):
                    for name in (getattr(node, "name", None), getattr(node, "rest", None)):
                        if isinstance(name, str):
                            self._event(n, inner, "store", name)
                    if isinstance(node, ast.expr):
                        self._expr(node, n, block)
                if case.guard is not None:
                    self._expr(case.guard, n, block)
                self._body(case.body, inner)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for child in ast.iter_child_nodes(s):
                if not isinstance(child, (ast.stmt, ast.arguments)):
                    self._expr(child, n, block)  # decorators, bases, annotations of the return
            if not isinstance(s, ast.ClassDef):
                self._nested(s.args, n, block)  # defaults and annotations are evaluated now
            self._event(n, block, "store", s.name)
            self._nested(s, n + 1, block)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for name in _imported(s):
                self.imports.add(name)
                self._event(n, block, "store", name)
        elif isinstance(s, ast.Assign):
            self._expr(s.value, n, block)
            for target in s.targets:
                self._target(target, n, block, "%s = \u2026")
        elif isinstance(s, ast.AnnAssign):
            self._expr(s.annotation, n, block)
            if s.value is not None:
                self._expr(s.value, n, block)
                self._target(s.target, n, block, "%s = \u2026")
            elif not isinstance(s.target, ast.Name):
                self._expr(s.target, n, block)
        elif isinstance(s, ast.AugAssign):
            self._expr(s.value, n, block)
            form = "%s " + _OPERATORS.get(type(s.op).__name__, "?") + "= \u2026"
            if isinstance(s.target, ast.Name):
                self._event(n, block, "load", s.target.id)
                self.forms.setdefault(s.target.id, form % s.target.id)
                self.updates.add(s.target.id)
            self._target(s.target, n, block, form)
        elif isinstance(s, ast.Delete):
            for target in s.targets:
                self._target(target, n, block, "del %s")
        else:
            for child in ast.iter_child_nodes(s):
                self._expr(child, n, block)

    def _target(self, t, n, block, form):
        if isinstance(t, ast.Name):
            self._event(n, block, "store", t.id)
        elif isinstance(t, ast.Starred):
            self._target(t.value, n, block, form)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for element in t.elts:
                self._target(element, n, block, form)
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            self._expr(t, n, block)
            self._mutation(_root(t), form % self._text(t), n, block, False)

    def _mutation(self, name, how, n, block, method):
        if name is None:
            return
        self._event(n, block, "mutate", name)
        self.forms.setdefault(name, how)
        (self.methods if method else self.others).add(name)

    def _expr(self, node, n, block, local=frozenset()):
        if isinstance(node, ast.Name):
            if node.id not in local:
                self._event(n, block, "load" if isinstance(node.ctx, ast.Load) else "store", node.id)
            return
        if isinstance(node, ast.NamedExpr):  # binds in the cell's scope, even inside a comprehension
            self._expr(node.value, n, block, local)
            self._event(n, block, "store", node.target.id)
            return
        if isinstance(node, ast.Lambda):
            self._nested(node, n + 1, block)
            return
        if isinstance(node, _COMPREHENSIONS):
            # The first iterable is evaluated here, the rest in the comprehension's own scope.
            generators = node.generators
            self._expr(generators[0].iter, n, block, local)
            inner = frozenset(local).union(x.id for g in generators for x in ast.walk(g.target) if isinstance(x, ast.Name))
            for generator in generators:
                for child in ([generator.iter] if generator is not generators[0] else []) + generator.ifs:
                    self._expr(child, n, block, inner)
            for child in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
                self._expr(child, n, block, inner)
            return
        if isinstance(node, ast.Call):
            self._call(node, n, block, local)
        for child in ast.iter_child_nodes(node):
            self._expr(child, n, block, local)

    def _call(self, call, n, block, local):
        func = call.func
        receiver = func.value if isinstance(func, ast.Attribute) else (call.args[0] if call.args else None)
        inplace = any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)
        if not inplace and not (isinstance(func, ast.Attribute) and func.attr in _MUTATING_METHODS):
            return
        name = _root(receiver) if receiver is not None else None
        if name is None or name in local:
            return
        how = "%s(\u2026%s)" % (self._text(func), ", inplace=True" if inplace else "")
        self._mutation(name, how, n, block, not inplace and isinstance(receiver, ast.Name))

    def _nested(self, node, n, block):
        """Globals a function, lambda, class or the defaults of a function read (when it is called, for a body)."""
        bound = _bound_inside(node) if not isinstance(node, ast.arguments) else set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load) and inner.id not in bound:
                self._event(n, block, "load", inner.id)

    def _text(self, node):
        text = ast.get_source_segment(self.source, node) if self.source is not None else None
        if text is None and hasattr(ast, "unparse"):
            text = ast.unparse(node)
        return _cut(" ".join((text or "\u2026").split()), _FORM_CHARS)


_OPERATORS = {
    "Add": "+", "Sub": "-", "Mult": "*", "MatMult": "@", "Div": "/", "Mod": "%", "Pow": "**", "LShift": "<<",
    "RShift": ">>", "BitOr": "|", "BitXor": "^", "BitAnd": "&", "FloorDiv": "//",
}


def _parse(source):
    import symtable

    tree = ast.parse(source, "<cell>", "exec")
    compile(tree, "<cell>", "exec", flags=getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0), dont_inherit=True)
    return tree, symtable.symtable(source, "<cell>", "exec")


def analyze_cell(code, transform):
    source = code
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
    flow = Flow(tree, source)
    read_first, _stores, mutates = flow.summary()
    # symtable counts `x += 1` as a binding only, and a name this cell binds is used from
    # elsewhere only when it is read before it is bound.
    uses = {n for n in reads | read_first if n not in defines or n in read_first}
    ignored = set(dir(builtins)) | _IPYTHON_NAMES
    answer = {"defines": sorted(defines - _IPYTHON_NAMES), "uses": sorted(uses - ignored)}
    changed = sorted(n for n in (mutates | (flow.updates & read_first)) & set(flow.forms) if n not in ignored)
    if changed:
        answer["mutates"] = [_change(flow, n) for n in changed]
    if flow.imports:
        answer["imports"] = sorted(flow.imports)
    return answer


def _change(flow, name):
    """One name the cell changes in place or updates: how (its first such form), and whether only
    by a method called on the name itself (which, on a module, is a function: `np.append(a, 1)`)."""
    change = {"name": name, "how": flow.forms[name]}
    if name in flow.methods and name not in flow.others:
        change["method"] = True
    return change


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


def _peak_rss_kb():
    try:
        import resource
    except ImportError:  # not on this platform: no bound
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _serve_stdin(max_rss_kb):
    """Answers a query a line until stdin ends, or until an answer leaves it past its memory bound."""
    for line in iter(sys.stdin.buffer.readline, b""):
        try:
            query = json.loads(line)
        except ValueError as e:
            query = {"kind": "unreadable query: %s" % _cut(_safe_str(e), NAME_CHARS)}
        _print_answer(query, {})
        if max_rss_kb and _peak_rss_kb() > max_rss_kb:
            return


if "_agent_bridge_query" in globals():  # exec'd in another kernel
    _print_answer(json.loads(globals()["_agent_bridge_query"]), globals()["_agent_bridge_ns"])
elif __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    _serve_stdin(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
elif __name__ == "__main__":
    _print_answer(json.load(sys.stdin), {})
