"""Agent Bridge code mode: change the notebook from the code you run in its kernel.

Available in scratchpad runs (`POST /api/kernel/execute`, marimo-pair's execute-code.sh, MCP
`execute_code`) on notebooks served by the bridge's builtin kernel ("Agent Bridge Python"):

    import agent_bridge as cm

    async with cm.get_context() as ctx:
        first = ctx.cells[0]                      # read a cell: by index (-1: the last) or id
        ctx.edit_cell(first.id, "x = 21")         # queued, not applied yet
        new = ctx.create_cell("y = x * 2", after=first.id)
        ctx.run_cell(first.id)
        ctx.run_cell(new)                         # the id create_cell returned works in the block
    print(ctx.globals["y"])                       # 42: the live kernel globals

Rules:
- Reads (`ctx.cells[...]`, iterating `ctx.cells`) ask the editor for the cells as they are now.
  Changes (`create_cell`, `edit_cell`, `delete_cell`, `move_cell`, `run_cell`) are queued and
  only allowed inside the block; at its clean end they are applied as ONE batch (all or
  nothing, one undo step for the person), then the queued runs execute in order. An exception
  inside the block discards the queue: nothing changes.
- Before anything is applied, every new or edited Python cell is compiled; a syntax error
  rejects the whole batch (SyntaxError naming the cell).
- Read before write: editing or deleting a non-empty cell whose current text you have not
  read (through `ctx.cells[...]`, a REST read, or your own write) raises `StaleCellError` and
  changes nothing: the person may have typed in it. Read it again and redo the change, or use
  `get_context(skip_staleness_check=True)` when you were asked to overwrite.
- Targets and positions (`target`, `before=`, `after=`) are cell ids, ids returned by
  `create_cell` in the same block, or indices; an index names a cell as the notebook was when
  the block began applying (before its changes).
- After the batch, one line per change is printed (`created cell 'c1x2y3' and ran`). When a
  cell that ran raises, its traceback is printed and the whole run reports failure.
- `create_cell` returns a provisional id ("new-1") usable in the same block and later; after
  the block, `ctx.created` lists the real ids of the new cells and `ctx.ids` maps each
  provisional id to its real id.
- `ctx.globals` is the kernel's real global namespace (the scratchpad itself runs on a copy):
  what the cells you ran defined is there.
- The bridge answers only while the run that calls is running, as the agent whose run it is:
  a thread or subprocess left behind by an earlier run, a run the person stopped ("Stop Agents"),
  or a change the access mode no longer allows gets `CallRefused` (nothing was changed).
"""

import ast
import sys

import _agent_bridge_host as _host

__all__ = [
    "get_context",
    "CodeModeContext",
    "CellsView",
    "Cell",
    "CodeModeError",
    "StaleCellError",
    "CallRefused",
]

CallRefused = _host.CallRefused

_PROVISIONAL_PREFIX = "new-"
_provisional_count = 0
_aliases = {}  # provisional id -> real id, once its block was applied


class CodeModeError(Exception):
    """The bridge refused a code-mode request; nothing was changed. `status` is the HTTP-style
    status the REST routes would answer (400 invalid, 404 no such cell, 409 conflict)."""

    def __init__(self, message, status=None):
        Exception.__init__(self, message)
        self.status = status


class StaleCellError(CodeModeError):
    """A cell you edit or delete changed since you last read it (or you never read it), so the
    batch was refused and nothing changed. `cells` lists the ids of the cells concerned;
    `current` maps each to its current state (a Cell). Read them again (`ctx.cells[id]`) and
    redo the change, or use `get_context(skip_staleness_check=True)` to overwrite."""

    def __init__(self, message, cells=(), current=None):
        CodeModeError.__init__(self, message, 409)
        self.cells = list(cells)
        self.current = dict(current or {})


class Cell(object):
    """A read-only snapshot of one cell, as the editor had it when it was read.

    id, index, kind ("code" | "markup"), language, code, version, status ("idle" | "queued" |
    "running" | "succeeded" | "failed" | "interrupted"; None for markup), success (of the last
    run: True/False, or None before one ended), execution_count, and
    outputs: a list of dicts, one per output item: {"type": "stdout" | "stderr" | "error" | <mime
    type>, "text"?, "name"?, "message"?, "traceback"?, "url"?, "truncated"?}.
    """

    __slots__ = ("id", "index", "kind", "language", "code", "version", "status", "success", "execution_count", "outputs")

    def __init__(self, view):
        execution = view.get("execution") or {}
        self.id = view.get("id")
        self.index = view.get("index")
        self.kind = view.get("kind")
        self.language = view.get("language")
        self.code = view.get("code")
        self.version = view.get("version")
        self.status = execution.get("status")
        self.success = execution.get("success")
        self.execution_count = execution.get("order")
        self.outputs = [item for output in view.get("outputs") or () for item in output.get("items") or ()]

    def __repr__(self):
        code = self.code if len(self.code or "") <= 60 else self.code[:57] + "..."
        return "Cell(id=%r, index=%r, kind=%r, language=%r, status=%r, code=%r)" % (
            self.id,
            self.index,
            self.kind,
            self.language,
            self.status,
            code,
        )


def _call(method, params=None):
    """A host call whose answer is {"ok": true, ...} or {"ok": false, "status", "detail", ...}."""
    answer = _host.call(method, params if params is not None else {})
    if not isinstance(answer, dict):
        raise CodeModeError("unexpected answer from the bridge to %s: %r" % (method, answer))
    return answer


def _refused(answer, hint=""):
    status = answer.get("status")
    detail = str(answer.get("detail") or "refused")
    cell = answer.get("cell")
    if status == 409 and isinstance(cell, dict):
        text = detail.split(" Nothing was changed", 1)[0]
        return StaleCellError(
            "%s Nothing was changed. Read it again with ctx.cells[%r] and redo the change, or use "
            "cm.get_context(skip_staleness_check=True) to overwrite it." % (text, cell.get("id")),
            cells=[cell.get("id")],
            current={cell.get("id"): Cell(cell)},
        )
    return CodeModeError(detail + hint, status)


def _real(ref):
    """A provisional id of an applied block becomes its real id; anything else is unchanged."""
    if isinstance(ref, str) and ref in _aliases:
        return _aliases[ref]
    return ref


def _check_ref(ref, what):
    if isinstance(ref, bool) or not isinstance(ref, (int, str)) or (isinstance(ref, str) and not ref):
        raise TypeError("%s must be a cell id (str) or index (int), not %r" % (what, ref))
    return ref


class CellsView(object):
    """The notebook's cells, read on demand: `ctx.cells[0]`, `ctx.cells[-1]`, `ctx.cells["c1x2y3"]`,
    `ctx.cells[1:3]`, `for cell in ctx.cells`, `len(ctx.cells)`. Each read asks the editor, so
    it sees the person's latest edits, and counts as having read what it returns."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __len__(self):
        return int(_call("cells.count").get("count", 0))

    def __iter__(self):
        return iter(self._all())

    def _all(self):
        answer = _call("cells.list")
        if not answer.get("ok"):
            raise _refused(answer)
        return [Cell(view) for view in answer.get("cells") or ()]

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._all()[key]
        _check_ref(key, "a cell key")
        if isinstance(key, str) and key in self._ctx._pending:
            raise KeyError("cell %r is created by this block; it exists once the block ends" % key)
        answer = _call("cells.get", {"ref": _real(key)})
        if answer.get("ok"):
            return Cell(answer["cell"])
        if answer.get("status") == 404:
            error = IndexError if isinstance(key, int) else KeyError
            raise error(str(answer.get("detail")))
        raise _refused(answer)

    def __repr__(self):
        return "<agent_bridge cells view: index by position or id, iterate, len()>"


class CodeModeContext(object):
    """Queues changes to the notebook and applies them as one batch at the end of the block.

    Use `async with cm.get_context() as ctx:` (a plain `with` works too). See `help(agent_bridge)`.
    """

    def __init__(self, skip_staleness_check=False):
        self._force = bool(skip_staleness_check)
        self._ops = None  # None: outside the block
        self._runs = []
        self._pending = set()  # provisional ids created in the current block
        self.created = []
        self.ids = {}

    # ---- the block --------------------------------------------------------------------------

    def __enter__(self):
        if self._ops is not None:
            raise RuntimeError("this code-mode context is already open")
        self._ops = []
        self._runs = []
        self._pending = set()
        return self

    def _close(self, failed):
        """Ends the block: applies the queue unless the block raised; returns the refusal, if any."""
        ops, runs = self._ops, self._runs
        self._ops, self._runs, self._pending = None, [], set()
        if failed or not (ops or runs):
            return None  # an exception discards the queue
        try:
            self._flush(ops, runs)
        except (CodeModeError, SyntaxError) as e:
            return e
        return None

    def __exit__(self, exc_type, exc, tb):
        error = self._close(exc_type is not None)
        if error is not None:
            raise error.with_traceback(None) from None  # the refusal, without the module's frames
        return False

    async def __aenter__(self):
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb):
        error = self._close(exc_type is not None)
        if error is not None:
            raise error.with_traceback(None) from None  # the refusal, without the module's frames
        return False

    # ---- reads ------------------------------------------------------------------------------

    @property
    def cells(self):
        """The notebook's cells (a CellsView): by index or id, iterable, len()."""
        return CellsView(self)

    @property
    def globals(self):
        """The kernel's live global namespace (not the scratchpad's copy)."""
        main = sys.modules.get("__main__")
        return main.__dict__ if main is not None else {}

    # ---- changes ----------------------------------------------------------------------------

    def _queue(self, name):
        if self._ops is None:
            raise RuntimeError(
                "ctx.%s() changes the notebook and must be called inside the block:\n\n"
                "    async with cm.get_context() as ctx:\n"
                "        ctx.%s(...)\n\n"
                "Changes are queued there and applied together when the block ends." % (name, name)
            )
        return self._ops

    def _target(self, ref, what):
        return _real(_check_ref(ref, what))

    def _position(self, before, after, name):
        if before is not None and after is not None:
            raise ValueError("%s: give before= or after=, not both" % name)
        out = {}
        if before is not None:
            out["before"] = self._target(before, "before")
        if after is not None:
            out["after"] = self._target(after, "after")
        return out

    def create_cell(self, code, *, before=None, after=None, language=None, kind=None):
        """Queues a new cell with `code`; at the end of the notebook unless `before=`/`after=`
        names a cell. kind: "code" (default) or "markup" ("markdown" also accepted); language:
        the notebook's own by default ("markdown" for markup). Returns a provisional id
        ("new-1") that later calls in this block (and later blocks) accept."""
        global _provisional_count
        ops = self._queue("create_cell")
        if not isinstance(code, str):
            raise TypeError("code must be a str")
        if kind == "markdown":
            kind = "markup"
        if kind not in (None, "code", "markup"):
            raise ValueError('kind must be "code" or "markup", not %r' % (kind,))
        if language is not None and (not isinstance(language, str) or not language):
            raise TypeError("language must be a non-empty str")
        op = {"op": "create", "code": code}
        op.update(self._position(before, after, "create_cell"))
        if kind is not None:
            op["kind"] = kind
        if language is not None:
            op["language"] = language
        _provisional_count += 1
        key = _PROVISIONAL_PREFIX + str(_provisional_count)
        op["key"] = key
        ops.append(op)
        self._pending.add(key)
        return key

    def edit_cell(self, target, code):
        """Queues replacing the whole text of cell `target` with `code`."""
        ops = self._queue("edit_cell")
        if not isinstance(code, str):
            raise TypeError("code must be a str")
        ops.append({"op": "edit", "ref": self._target(target, "target"), "code": code})

    def delete_cell(self, target):
        """Queues deleting cell `target`."""
        self._queue("delete_cell").append({"op": "delete", "ref": self._target(target, "target")})

    def move_cell(self, target, *, before=None, after=None):
        """Queues moving cell `target` next to another: exactly one of before= / after=."""
        ops = self._queue("move_cell")
        if before is None and after is None:
            raise ValueError("move_cell: give before= or after=")
        op = {"op": "move", "ref": self._target(target, "target")}
        op.update(self._position(before, after, "move_cell"))
        ops.append(op)

    def run_cell(self, target):
        """Queues running code cell `target` once the changes are applied; runs go in the order
        they were queued, and their console output is printed here."""
        self._queue("run_cell")
        ref = self._target(target, "target")
        if ref not in self._runs:
            self._runs.append(ref)

    # ---- applying -----------------------------------------------------------------------------

    def _flush(self, ops, runs):
        self._compile_check(ops)
        answer = _call("cells.flush", {"ops": ops, "run": runs, "force": self._force})
        if not answer.get("ok"):
            raise _refused(answer)
        keys = [op["key"] for op in ops if op["op"] == "create"]
        created = answer.get("created") or {}
        self.ids = {key: created[key] for key in keys if created.get(key)}
        self.created = [self.ids[key] for key in keys if key in self.ids]
        _aliases.update(self.ids)
        results = answer.get("runs") or []
        self._summarize(ops, answer.get("ops") or [], results)
        if any(r.get("success") is not True for r in results):
            _host.fail_run()

    def _compile_check(self, ops):
        """Compiles the final code of every new or edited Python cell; a syntax error rejects
        the whole batch. Cells of other languages and kinds are not compiled."""
        creates = {}
        final = {}  # ref -> (code, how): the last write wins, as in the batch
        for op in ops:
            if op["op"] == "create":
                creates[op["key"]] = op
                final[op["key"]] = (op["code"], "created")
            elif op["op"] == "edit":
                final[op["ref"]] = (op["code"], "created" if op["ref"] in creates else "edited")
        layout = None
        for ref, (code, how) in final.items():
            if isinstance(ref, str) and ref in creates:
                source = creates[ref]
                if source.get("kind", "code") != "code" or source.get("language", "python") not in ("python", "mo-python"):
                    continue
            else:
                if layout is None:
                    layout = _call("cells.layout").get("cells") or []
                cell = _find(layout, ref)
                if cell is None or cell.get("kind") != "code" or cell.get("language") not in ("python", "mo-python"):
                    continue  # unknown cells are the bridge's to report; others are not Python
            try:
                compile(code, "<cell %s>" % (ref,), "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            except SyntaxError as e:
                e.msg = "%s (in the code of cell %r, %s in this block; nothing was changed)" % (e.msg, ref, how)
                raise e
            except ValueError as e:  # null bytes
                raise SyntaxError("%s (in the code of cell %r; nothing was changed)" % (e, ref))

    def _summarize(self, ops, applied, results):
        ran = {}
        for r in results:
            if r.get("id") not in ran:
                ran[r.get("id")] = r
        lines = []
        mentioned = set()
        for op, info in zip(ops, applied):
            cell = info.get("id") if isinstance(info, dict) else None
            if not cell:
                continue  # created and deleted again in this block
            verb = {"create": "created", "edit": "edited", "delete": "deleted", "move": "moved"}[op["op"]]
            if op["op"] != "create" and isinstance(op.get("ref"), str) and op["ref"] in self.ids:
                continue  # a change to a cell this block created: "created" says it
            line = "%s cell %r" % (verb, cell)
            if cell in ran and cell not in mentioned:
                line += _ran(ran[cell])
                mentioned.add(cell)
            lines.append(line)
        for cell, r in ran.items():
            if cell not in mentioned:
                lines.append("ran cell %r%s" % (cell, _ran(r, "")))
        if lines:
            sys.stdout.write("\n".join(lines) + "\n")


def _ran(result, prefix=" and ran"):
    if result.get("success") is True:
        return prefix
    error = result.get("error")
    if isinstance(error, dict):
        return "%s: failed with %s: %s" % (prefix, error.get("name"), error.get("message"))
    if result.get("done") is False:
        return "%s: %s" % (prefix, result.get("detail") or "its end was not awaited")
    if result.get("success") is None or result.get("status") == "interrupted":
        return "%s: cancelled" % prefix  # interrupted before its turn
    return "%s: failed" % prefix


def _find(layout, ref):
    if isinstance(ref, int):
        n = len(layout)
        index = ref + n if ref < 0 else ref
        return layout[index] if 0 <= index < n else None
    for cell in layout:
        if cell.get("id") == ref:
            return cell
    if isinstance(ref, str) and ref.lstrip("-").isdigit():
        return _find(layout, int(ref))
    return None


def get_context(*, skip_staleness_check=False):
    """Returns a CodeModeContext for this kernel's notebook; use it as `async with cm.get_context()
    as ctx:`. skip_staleness_check=True overwrites cells even if they changed since you read them
    (only when you were asked to)."""
    return CodeModeContext(skip_staleness_check=skip_staleness_check)
