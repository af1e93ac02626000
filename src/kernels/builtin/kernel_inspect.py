"""Reading a kernel's state and a notebook's code without running a cell (stdlib only, 3.8+).

Three queries, each answered with a JSON-able dict:
  {"kind":"variables"}                  the user's variables: name, type, shape or length, size, a short repr
  {"kind":"variable","name":str}        one variable: a longer repr; columns and dtypes of a DataFrame
  {"kind":"analyze","cells":[{"id","code"}],"ipython":bool}
                                        each cell's top-level definitions, the globals it uses and those it
                                        changes in place ("mutates": name, how), the names it imports
                                        (symtable and ast, `Flow`), or its syntax error with line and column

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
