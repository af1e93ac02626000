"""What a cell's run read and changed, for the bridge's stale marks (stdlib only, 3.8+).

kernel.py makes one Record per cell run. `instrument` takes the cell's syntax tree before it is
compiled (IPython's, after its own transformations) and reads it with kernel_inspect.Flow: which
names each block reads, binds and changes in place; it puts a mark at the start of every block but
the first (`__agent_bridge_reached__[k] = 1`, a name in builtins while the run lasts), so the run
says which branches and handlers it entered (not inside loops, where a mark would cost each
iteration: there every branch counts as entered). `end` then gives the names the run read in
the blocks it reached, and those it bound or changed: the blocks' bindings and changes in place,
plus what the globals show changed since `begin`, which catches a change made through another
name or inside a called function. A global is compared by identity and a cheap signal of its
content: length and the identity of sampled items for lists, dicts and sets; shape, dtype and a
hash of sampled elements for numpy arrays and pandas objects; the values' identities for an
object's attributes. A change outside the samples can go unseen there (the code's analysis
still sees the forms it knows). A cell run right after another takes the globals as that one
left them, without a snapshot of its own.

Only types whose signal is read without running the user's code get one (numpy and pandas are
read through their own methods, on a sample); every other value is compared by identity.
"""

import builtins
import sys
import time
import types

MARK = "__agent_bridge_reached__"
SAMPLE = 16  # items, rows or elements sampled per value
COLUMNS = 32  # columns of a DataFrame sampled
MAX_NAMES = 2000  # globals given a signal; more are compared by identity
SIGNAL_SECONDS = 0.01  # per snapshot: globals after that are compared by identity
MAX_LISTED = 1000  # names per list in a record; a longer one makes the record unusable
MAX_STATEMENTS = 5000  # top-level statements of a cell read for a record (reading costs ~10 us each)
_ATOMS = (int, float, complex, str, bytes, bool, type(None), range)
_CODE_LIKE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)


def _positions(n):
    """Up to SAMPLE indices spread over 0..n-1, both ends included."""
    if n <= SAMPLE:
        return list(range(n))
    step = (n - 1) / (SAMPLE - 1)
    return sorted({int(round(i * step)) for i in range(SAMPLE)})


def _ids(values):
    """Plain values as they are, anything else by identity (a subclass's __eq__ or __hash__ is user code)."""
    return tuple(v if type(v) in _ATOMS else id(v) for v in values)


def _array_signal(array):
    if array.size <= SAMPLE:
        sample = array.reshape(-1)
    else:  # the sampled elements only: no copy of a large array that is not contiguous
        sample = array[sys.modules["numpy"].unravel_index(_positions(array.size), array.shape)]
    data = _ids(sample.tolist()) if array.dtype.kind == "O" else sample.tobytes()
    return ("ndarray", array.shape, array.dtype.str, hash(data))


def _column_signal(column):
    values = column.to_numpy()
    data = _ids(values.tolist()) if values.dtype.kind == "O" else values.tobytes()
    return (str(column.dtype), hash(data))


def _frame_signal(frame):
    sample = frame.take(_positions(frame.shape[0]))
    if frame.shape[1] > COLUMNS:
        sample = sample.iloc[:, :COLUMNS]
    columns = tuple(str(c) for c in frame.columns[:COLUMNS])
    return ("DataFrame", frame.shape, columns, _ids(sample.index.tolist()), tuple(_column_signal(c) for _, c in sample.items()))


def _signal(value):
    """A cheap signal of a value's content, or None where identity says all there is to know."""
    kind = type(value)
    if kind in (list, bytearray):
        n = len(value)
        return (n, _ids(value[i] for i in _positions(n)))
    if kind is dict:
        n = len(value)
        keys = list(value)[:SAMPLE] if n <= 4 * SAMPLE else [k for _, k in zip(range(SAMPLE), value)] + [k for _, k in zip(range(SAMPLE), reversed(value))]
        return (n, _ids(keys), _ids(value[k] for k in keys))
    if kind is set:
        return (len(value), hash(frozenset(_ids(value))) if len(value) <= 64 * SAMPLE else None)
    module = getattr(kind, "__module__", "") or ""
    if module == "numpy" and kind.__name__ == "ndarray":
        return _array_signal(value)
    if module.startswith("pandas.") and kind.__name__ == "DataFrame":
        return _frame_signal(value)
    if module.startswith("pandas.") and kind.__name__ == "Series":
        sample = value.iloc[_positions(value.shape[0])]
        return ("Series", value.shape, str(value.name), _ids(sample.index.tolist()), _column_signal(sample))
    attributes = _instance_dict(kind, value)
    if attributes is not None:
        return (len(attributes), tuple(attributes.keys())[: 4 * SAMPLE], _ids(list(attributes.values())[: 4 * SAMPLE]))
    return None


def _instance_dict(kind, value):
    """An instance's own attribute dict, where the class keeps Python's plain one (not a property)."""
    if issubclass(kind, _ATOMS + _CODE_LIKE + (tuple, frozenset)):
        return None
    for klass in kind.__mro__:
        slot = klass.__dict__.get("__dict__")
        if slot is not None:
            if type(slot) is not types.GetSetDescriptorType:
                return None
            attributes = slot.__get__(value, kind)
            return attributes if type(attributes) is dict else None
    return None


def snapshot(ns):
    """name -> (identity, signal or None) for the user's globals (names starting with "_" are the shell's)."""
    taken = {}
    deadline = time.monotonic() + SIGNAL_SECONDS
    for name, value in list(ns.items()):
        if not isinstance(name, str) or name.startswith("_"):
            continue
        signal = None
        if len(taken) < MAX_NAMES and time.monotonic() < deadline and not isinstance(value, _ATOMS + _CODE_LIKE):
            try:
                signal = _signal(value)
            except Exception:
                signal = None
        taken[name] = (id(value), signal)
    return taken


def _marker(block, where):
    """`__agent_bridge_reached__[block] = 1`, placed at `where` (so no traceback line moves)."""
    import ast

    node = ast.Assign(
        targets=[ast.Subscript(value=ast.Name(id=MARK, ctx=ast.Load()), slice=_index(block), ctx=ast.Store())],
        value=ast.Constant(value=1),
    )
    return ast.copy_location(node, where)


def _index(block):
    import ast

    constant = ast.Constant(value=block)
    return constant if sys.version_info >= (3, 9) else ast.Index(value=constant)


_runs = [0, None]  # runs started (`started`), and (that count, snapshot) as the last cell run left the globals


def started():
    """Every run (cell or scratchpad) says it starts: a cell run right after another cell run takes the
    globals as that one left them, without a snapshot of its own; any other run in between may change them."""
    _runs[0] += 1


class Record(object):
    """One cell run's reads and changes; `instrument` before it compiles, `begin` and `end` around it."""

    def __init__(self, flow_class, ignored):
        self._flow_class = flow_class
        self._ignored = ignored
        self._flow = None
        self._before = None
        self._reached = None
        self._held = None

    def instrument(self, tree):
        """The tree with its block marks; left as it is when it cannot be read (the record is then empty)."""
        if self._flow is not None:
            return tree  # code a magic compiles during the run (%time, %timeit): not the cell's
        if len(getattr(tree, "body", ())) > MAX_STATEMENTS:
            return tree  # generated code: its record would delay the run (and an interrupt of it)
        try:
            flow = self._flow_class(tree)
        except Exception:  # RecursionError on a deeply nested cell, ...
            return tree
        import ast

        for statements, block in flow.entries:
            statements.insert(0, _marker(block, statements[0]))
        ast.fix_missing_locations(tree)
        self._flow = flow
        self._reached = bytearray(len(flow.entries) + 1)
        self._reached[0] = 1
        setattr(builtins, MARK, self._reached)
        return tree

    def begin(self, ns):
        last = _runs[1]
        self._before = last[1] if last is not None and last[0] == _runs[0] - 1 else snapshot(ns)
        # A run nested in this one (code mode) sets its own marks' target, and gives this one back.
        self._held = getattr(builtins, MARK, None)

    def end(self, ns):
        """{reads, defines, mutates} of the run, or None when it was not read (not compiled, too big)."""
        if self._held is None:
            try:
                delattr(builtins, MARK)
            except AttributeError:
                pass
        else:
            setattr(builtins, MARK, self._held)
        if self._flow is None or self._before is None:
            return None
        reached = {k for k, hit in enumerate(self._reached) if hit}
        reads, stores, mutates = self._flow.summary(reached)
        after = snapshot(ns)
        _runs[1] = (_runs[0], after)
        before = self._before
        defines = set(stores)
        for name in set(before) | set(after):
            was, now = before.get(name), after.get(name)
            if was is None or now is None or was[0] != now[0]:
                defines.add(name)
            elif was[1] is not None and now[1] is not None and was[1] != now[1]:
                mutates.add(name)
        # A module's "mutating" method is one of its functions (np.append): changes no name.
        mutates = {n for n in mutates - defines if not isinstance(ns.get(n), types.ModuleType)}
        record = {
            "reads": sorted(n for n in reads if n not in self._ignored),
            "defines": sorted(n for n in defines if n not in self._ignored),
            "mutates": sorted(n for n in mutates if n not in self._ignored),
        }
        if any(len(names) > MAX_LISTED for names in record.values()):
            return None
        return record
