"""Agent Bridge builtin kernel: runs notebook code for the VS Code extension (stdlib only, 3.8+).

Started as `python -u kernel.py 3 4` (request fd, message fd). stdin is /dev/null, so input()
raises EOFError. While a run executes, fds 1/2 are pipes of that run (see _RunFds), so OS-level
output (subprocesses, C code) reaches only that run; between runs they are the host's
stdout/stderr. One JSON object per line, UTF-8, on each channel:

  host -> kernel (fd 3)
    {"op":"execute","id":int,"code":str,"mode":"cell"|"scratchpad"[,"cell":{"count":int}]}
    {"op":"reply","rid":int,"result":any}  |  {"op":"reply","rid":int,"error":str[,"interrupt":true]}
    {"op":"inspect","qid":int,"query":{"kind":"variables"|"variable"|"analyze",...}}  (kernel_inspect.py)
  kernel -> host (fd 4)
    {"type":"ready","pid":int,"python":"3.11.7","ipython":"8.5.0"|null}  once, at start
    {"type":"stream","id":int|null,"name":"stdout"|"stderr","text":str}  id: the run that wrote it (null: none)
    {"type":"display","id":int,"data":{mime:str}[,"metadata":{}][,"execution_count":int]}
    {"type":"error","id":int,"name":str,"message":str,"traceback":str}
    {"type":"done","id":int,"success":bool,"value":{mime:str}|null[,"execution_count":int]}  ends every run
    {"type":"call","rid":int,"id":int|null,"method":str,"params":any}    answered by a reply
    {"type":"inspected","qid":int,"result":{...}}   answers an inspect, even while a run executes

Code calls the host with `import _agent_bridge_host; _agent_bridge_host.call(method, params)`:
it blocks until the reply and returns its result, or raises _agent_bridge_host.HostCallError
(KeyboardInterrupt when the reply says the calling run was interrupted). While the main thread
waits for a reply, execute requests that arrive are run at once, nested, on the main thread (the
host may answer a call by running cells: they must not queue behind the run that waits for
them). Each run keeps its own id, so its output is routed to it; SIGINT interrupts the innermost
running code. `_agent_bridge_host.fail_run()` makes the current run end with success false.

When the Python can import IPython (and AGENT_BRIDGE_IPYTHON is not "0"), runs go through
IPython's InteractiveShell (kernel_ipython.py beside this file): a cell's value is then a
`display` with `execution_count` (Jupyter's execute_result), sent when it is computed, and its
`done` carries the cell's execution count; `value` is only used by scratchpad runs. Without
IPython, a cell's value is `done.value`, and `cell.count` is the cell run's execution count, which
names its code in tracebacks.

The code-mode module `agent_bridge` (agent_bridge.py beside this file) is importable in
scratchpad runs only, unless AGENT_BRIDGE_CODE_MODE_IN_CELLS=1 makes it importable in cells too.
SIGINT raises KeyboardInterrupt only while a run executes. EOF on fd 3 (host gone) exits.
"""

import sys

if sys.version_info < (3, 8):  # before the imports, which older Pythons may lack
    sys.stderr.write("The Agent Bridge kernel needs Python 3.8 or newer; this is %s.\n" % sys.version.split()[0])
    sys.exit(1)

import ast
import base64
import builtins
import codecs
import collections
import io
import itertools
import json
import linecache
import os
import select
import signal
import threading
import time
import traceback
import types

try:
    from _signal import getsignal as _getsignal  # signal.getsignal wraps ints in an enum: slow
except ImportError:
    _getsignal = signal.getsignal

_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE; inspect is slow to import
_FLUSH_CHARS = 8192  # buffered output above this is sent at once
_FLUSH_DELAY = 0.01  # output waits at most this long, so print loops coalesce
_CHUNK_CHARS = 1 << 20  # one huge write still streams in pieces
_DRAIN_TIMEOUT = 0.2  # how long a run's end waits for output its subprocesses wrote
_DRAIN_QUIET = 0.02  # ... or less, once its pipes were quiet this long
_TEXT_CHARS = 1 << 20  # a value's text, an error message or a traceback keeps head + tail within this
_DATA_CHARS = 16 << 20  # a binary display item (base64) above this is replaced by a note

_lock = threading.Lock()  # guards the output buffer and fd 4, so messages keep their order
_lock_holder = None  # ident of the thread inside _lock (see _locked_flush_then)
_late = []  # encoded messages sent from code that ran inside a flush, written when it ends
_msg_fd = -1  # -1 in forked children: only the kernel process may speak the protocol
_main_ident = threading.get_ident()
_run_id = None
_executing = False  # user code may be interrupted
_io_busy = False  # the main thread is inside _lock: an interrupt now would tear a message
_interrupt_pending = False
_buf = []  # (stream name, text) items not yet sent
_buf_size = 0
_flush_armed = False
_wake_flusher = threading.Event()
_user_ns = {}
_loops = []  # asyncio loops of runs with top-level await; a nested run needs another than its caller's
_idle_fds = None  # (stdout, stderr): dups of the host's fds 1/2, where OS-level output goes between runs
_run_fds = None  # _RunFds of the innermost run
_real_exit = os._exit
_ipython = None  # kernel_ipython.Shell when runs go through IPython
_text = None  # kernel_text, when it is beside this file
_inbox = collections.deque()  # execute requests not yet started, appended by the reader thread
_inbox_wake = threading.Event()  # set on every request and reply: the main thread may have work
_failed_runs = set()  # ids of runs that fail_run() marked failed
_CODE_MODE = "agent_bridge"
_code_mode_in_cells = os.environ.get("AGENT_BRIDGE_CODE_MODE_IN_CELLS") == "1"
_code_mode_module = None
_inspect = None  # kernel_inspect: variables and the cells' analysis, answered beside the runs


def _write_line(data):
    """Writes encoded messages; caller holds _lock."""
    if _msg_fd < 0:
        return
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(_msg_fd, view):]
    except OSError:
        _real_exit(0)  # the host closed its end: nobody is left to serve


_json_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # dumps(**kw) builds one per call


def _encode(obj):
    return (_json_encode(obj) + "\n").encode("utf-8", "replace")


def _flush_locked(tail=None):
    """Sends buffered output, one stream message per run of the same stream, then `tail` (an
    encoded message) if any, in ONE write: a print and the run's end reach the host together,
    which then wakes once, not twice. Caller holds _lock."""
    global _buf_size
    messages = []
    n = len(_buf)
    if n:
        items = _buf[:n]
        del _buf[:n]  # writers append without the lock; anything they added stays queued
        _buf_size = 0
        name, run, parts = items[0][0], items[0][2], []
        for item in items:
            if item[0] is not name or item[2] != run:
                _stream_messages(messages, name, run, "".join(parts))
                name, run, parts = item[0], item[2], []
            parts.append(item[1])
        _stream_messages(messages, name, run, "".join(parts))
    if tail is not None:
        messages.append(tail)
    if messages:
        _write_line(messages[0] if len(messages) == 1 else b"".join(messages))


def _stream_messages(messages, name, run, text):
    for i in range(0, len(text), _CHUNK_CHARS):
        messages.append(_encode({"type": "stream", "id": run, "name": name, "text": text[i:i + _CHUNK_CHARS]}))


def _locked_flush_then(data):
    """Flushes output, then writes `data` (if any) under _lock, deferring interrupts meanwhile."""
    global _io_busy, _lock_holder, _flush_armed
    me = threading.get_ident()
    if _lock_holder == me:
        # Re-entered by code that ran inside this thread's own flush: a GC callback, a finalizer
        # or a warning that prints. Waiting for _lock would hang the kernel for good; the text
        # stays buffered for the flusher instead, and a message leaves when this flush ends.
        if data is not None:
            _late.append(data)
        _flush_armed = True
        _wake_flusher.set()
        return
    main = me == _main_ident
    with _lock:
        try:  # an interrupt before _io_busy is set must still leave the holder cleared
            _lock_holder = me
            if main:
                _io_busy = True
            _flush_locked(data)
            while _late:
                _flush_locked(_late.pop(0))
        finally:
            _lock_holder = None
            if main:
                _io_busy = False
    if _interrupt_pending and main:
        _raise_deferred_interrupt()


def _raise_deferred_interrupt():
    global _interrupt_pending
    _interrupt_pending = False
    if _executing:
        raise KeyboardInterrupt


def _send(obj):
    """Sends a message after any buffered output."""
    _locked_flush_then(_encode(obj))


class _OutStream(io.TextIOBase):
    """sys.stdout / sys.stderr. Both share one buffer of (stream, text) items, so their
    interleaving survives coalescing; writers append without a lock (list.append is atomic)
    because a lock per print() doubled its cost."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, name, fd):
        super().__init__()
        self._name = name
        self._fd = fd
        self.name = "<%s>" % name

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fd  # libraries that write to the fd still reach the host, through fd 1/2

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if _msg_fd < 0:
            os.write(self._fd, s.encode("utf-8", "replace"))
            return len(s)
        _buffer(self._name, s, _run_id if _get_ident() == _main_ident else _thread_run())
        return len(s)

    def flush(self):
        if _msg_fd >= 0:
            _locked_flush_then(None)


def _buffer(name, s, run):
    """Queues output of run `run` (None: of no run); the host routes it by that id."""
    global _buf_size, _flush_armed
    _buf.append((name, s, run))
    _buf_size += len(s)
    if _buf_size >= _FLUSH_CHARS:
        _locked_flush_then(None)
    elif not _flush_armed:
        # First write after a quiet spell: a complete line goes out now; whatever follows
        # within _FLUSH_DELAY waits for the flusher thread, which coalesces print loops.
        _flush_armed = True
        _wake_flusher.set()
        if "\n" in s:
            _locked_flush_then(None)


_get_ident = threading.get_ident
_thread_start = threading.Thread.start


_ANY_RUN = object()  # tag of the kernel's own threads: code they run (a GC callback) writes into the active run


def _thread_run():
    """The run that started the current thread (None for threads started between runs)."""
    run = getattr(threading.current_thread(), "_agent_bridge_run", None)
    return _run_id if run is _ANY_RUN else run


def _start_tagged(self):
    # A thread's output belongs to the run that started it, not to whichever run is active when
    # it prints: a thread that outlives its run must not write into another client's run.
    self._agent_bridge_run = _run_id if _get_ident() == _main_ident else _thread_run()
    _thread_start(self)


_stdout = _OutStream("stdout", 1)
_stderr = _OutStream("stderr", 2)


def _flusher():
    global _flush_armed
    while True:
        _wake_flusher.wait()
        _wake_flusher.clear()
        time.sleep(_FLUSH_DELAY)
        _flush_armed = False  # a write from here on arms the next round
        _locked_flush_then(None)


def _on_sigint(signum, frame):
    global _interrupt_pending
    if not _executing:
        return
    if _io_busy:
        _interrupt_pending = True  # raised by the writer once the message is complete
        return
    raise KeyboardInterrupt


def _exit_flushed(status):
    """os._exit that first sends what the run printed: `print(x); os._exit(1)` must deliver x."""
    try:
        if _msg_fd >= 0 and _get_ident() != _lock_holder:
            if _run_fds is not None:
                _run_fds.drain_open(_DRAIN_TIMEOUT)
            _locked_flush_then(None)
    finally:
        _real_exit(status)


# ---- OS-level output (fds 1/2) ----------------------------------------------------------------

class _RunFds(object):
    """Pipes dup2'ed onto fds 1/2 while one run executes. A subprocess inherits the pipes of the
    run that spawned it and keeps them after that run ended, so what it writes later is still
    tagged with its own run, never with the run active at the time. _FdPump forwards what
    arrives, until EOF (when the kernel and every child closed the write ends)."""

    __slots__ = ("run_id", "writers", "readers", "open", "last_read", "lock")

    def __init__(self, run_id):
        self.run_id = run_id
        self.last_read = 0.0
        self.lock = threading.Lock()  # held by the pump while it reads and forwards a chunk
        out_r, out_w = os.pipe()
        try:
            err_r, err_w = os.pipe()
        except OSError:
            os.close(out_r)
            os.close(out_w)
            raise
        self.writers = (out_w, err_w)
        self.readers = (out_r, err_r)
        self.open = [True, True]  # read ends the pump has not closed yet
        _pump.add(self)

    def attach(self):
        os.dup2(self.writers[0], 1)
        os.dup2(self.writers[1], 2)

    def close(self, then):
        """Gives fds 1/2 to `then` (the outer run's pipes, or the host's), drops the kernel's write
        ends and waits for what is left: until the pipes are empty with no writer left, or quiet
        for _DRAIN_QUIET (a subprocess still holds them), at most _DRAIN_TIMEOUT."""
        if then is None:
            os.dup2(_idle_fds[0], 1)
            os.dup2(_idle_fds[1], 2)
        else:
            then.attach()
        for w in self.writers:
            os.close(w)
        start = time.monotonic()
        while not self._drained():
            now = time.monotonic()
            if now - start > _DRAIN_TIMEOUT or (now - start > _DRAIN_QUIET and now - self.last_read > _DRAIN_QUIET):
                return
            time.sleep(0.0005)

    def _drained(self):
        # Under the lock the pump is not between a read and its forwarding: an empty pipe whose
        # writers are all gone (POLLHUP) has nothing left to come.
        with self.lock:
            for i, r in enumerate(self.readers):
                if not self.open[i]:
                    continue
                poller = select.poll()
                poller.register(r, select.POLLIN)
                events = poller.poll(0)
                if not (events and events[0][1] & select.POLLHUP) or _unread(r):
                    return False
        return True

    def drain_open(self, timeout):
        """Before a hard exit: waits until the pump has forwarded what is in the (still open) pipes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not any(self.open[i] and _unread(r) for i, r in enumerate(self.readers)):
                    return
            time.sleep(0.001)


def _unread(fd):
    """Bytes waiting in a pipe (1 where that cannot be asked: assume some)."""
    try:
        fcntl.ioctl(fd, termios.FIONREAD, _count, True)
    except (AttributeError, OSError):
        return 1
    return _count[0]


class _FdPump(object):
    """One thread forwarding the pipes of every run (see _RunFds): a thread per run would cost
    each run its start."""

    def __init__(self):
        import selectors

        self._events = selectors.EVENT_READ
        self._sel = selectors.DefaultSelector()
        # epoll watches an fd registered from another thread at once: the pump need not wake
        # (and take the GIL) at every run's start.
        self._direct = isinstance(self._sel, getattr(selectors, "EpollSelector", ()))
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._sel.register(self._wake_r, self._events, None)
        self._new = collections.deque()
        _start_thread(self._forward)

    def add(self, fds):
        if self._direct:
            self._register(fds)
        else:
            self._new.append(fds)
            os.write(self._wake_w, b"\0")

    def _register(self, fds):
        for i, name in enumerate(("stdout", "stderr")):
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            self._sel.register(fds.readers[i], self._events, (fds, i, name, decoder))

    def _forward(self):
        sel = self._sel
        while True:
            for key, _ in sel.select():
                if key.data is None:
                    try:
                        os.read(self._wake_r, 4096)
                    except OSError:
                        pass
                    while self._new:
                        self._register(self._new.popleft())
                    continue
                fds, i, name, decoder = key.data
                with fds.lock:
                    try:
                        data = os.read(key.fd, 65536)
                    except OSError:
                        data = b""
                    text = decoder.decode(data, not data)
                    if text:
                        _buffer(name, text, fds.run_id)
                    fds.last_read = time.monotonic()
                    if not data:
                        sel.unregister(key.fd)
                        os.close(key.fd)
                        fds.open[i] = False


_pump = None
try:
    import array
    import fcntl
    import termios

    _count = array.array("i", [0])
    termios.FIONREAD
except (ImportError, AttributeError):
    fcntl = None  # _unread() then assumes there is something to read


def _open_run_fds(run_id):
    """The run's own fds 1/2, or None where pipes cannot be made (then fds 1/2 stay as they are)."""
    if _pump is None:
        return None
    try:
        fds = _RunFds(run_id)
    except OSError as e:
        os.write(_idle_fds[1], ("agent-bridge kernel: no pipes for run %s: %s\n" % (run_id, e)).encode())
        return None
    fds.attach()
    return fds


# ---- host calls -------------------------------------------------------------------------------

class HostCallError(Exception):
    """The host answered a call with an error (unknown method, handler failure, no handler)."""


HostCallError.__module__ = "_agent_bridge_host"


class _PendingCall(object):
    __slots__ = ("event", "result", "error", "interrupt")

    def __init__(self):
        self.event = threading.Event()
        self.result = None
        self.error = None
        self.interrupt = False


_calls = {}
_call_ids = itertools.count(1)


def _bridge_call(method, params=None):
    """Calls `method` on the host with JSON-serialisable params; blocks until it answers."""
    if not isinstance(method, str):
        raise TypeError("method must be a str")
    if _msg_fd < 0:
        raise RuntimeError("host calls are only available in the kernel process, not a forked child")
    rid = next(_call_ids)
    pending = _PendingCall()
    _calls[rid] = pending
    try:
        _send({"type": "call", "rid": rid, "id": _run_id, "method": method, "params": params})
        if threading.get_ident() == _main_ident:
            _serve_until(pending.event)
        else:
            pending.event.wait()
    finally:
        _calls.pop(rid, None)
    if pending.interrupt:
        raise KeyboardInterrupt
    if pending.error is not None:
        raise HostCallError(pending.error)
    return pending.result


def _serve_until(event):
    """Waits on the main thread for `event`, running the execute requests that arrive meanwhile
    (nested runs). An interrupt while waiting raises here, in the caller's code; while a nested
    run starts or ends it is ignored, so a request taken from the inbox always gets its `done`."""
    global _executing
    while not event.is_set():
        if _inbox:
            outer = _executing
            _executing = False
            try:
                _execute(_inbox.popleft())
            finally:
                _executing = outer
            continue
        _inbox_wake.wait()
        _inbox_wake.clear()


def _deliver_reply(msg):
    pending = _calls.pop(msg.get("rid"), None)
    if pending is None:
        return  # the caller was interrupted; a late answer has nowhere to go
    pending.result = msg.get("result")
    error = msg.get("error")
    pending.error = None if error is None else str(error)
    pending.interrupt = msg.get("interrupt") is True
    pending.event.set()
    _inbox_wake.set()


def _fail_run():
    """Makes the current run end with success false (its output and value are kept)."""
    if _run_id is not None:
        _failed_runs.add(_run_id)


def _install_host_module():
    mod = types.ModuleType("_agent_bridge_host", "Synchronous calls from kernel code into the Agent Bridge host.")
    mod.call = _bridge_call
    mod.fail_run = _fail_run
    mod.HostCallError = HostCallError
    sys.modules["_agent_bridge_host"] = mod


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
                _stderr.write("agent_bridge could not be loaded: %s: %s\n" % (type(e).__name__, e))
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


# ---- rich values --------------------------------------------------------------------------------

_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
    ("text/latex", "_repr_latex_"),
)


_PLAIN_TYPES = frozenset((int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, range))


def _getattr(value, name):
    try:
        return getattr(value, name, None)
    except Exception:
        return None


def _mime_text(mime, data):
    if isinstance(data, tuple) and data:
        data = data[0]  # (data, metadata)
    if isinstance(data, str):
        return data
    if isinstance(data, (bytes, bytearray)):
        if mime.startswith("text/") or mime == "image/svg+xml":
            return bytes(data).decode("utf-8", "replace")
        return base64.b64encode(bytes(data)).decode("ascii")
    if data is not None and "json" in mime:
        return json.dumps(data)
    return None


def _cut(text, limit=_TEXT_CHARS, show=str):
    """An oversize text (or str/bytes value) as its head and tail, with a marker saying how much
    was cut; `show` renders each part."""
    n = len(text)
    if n <= limit:
        return show(text)
    keep = limit // 2
    return "%s\n[... %d of %d characters cut by Agent Bridge ...]\n%s" % (show(text[:keep]), n - 2 * keep, n, show(text[-keep:]))


def _plain_repr(value):
    # A huge str or bytes is cut before repr, which would copy it whole (and up to 4x over); with
    # room for the quotes and the marker, so _capped (IPython's path) does not cut it again.
    if type(value) in (str, bytes):
        return _cut(value, _TEXT_CHARS - 256, repr)
    return _cut(repr(value))


def _capped(data):
    """A mimebundle within the caps: texts keep head and tail; a binary item that is too big
    (cutting would corrupt it) is dropped, with a note in text/plain."""
    notes = []
    for mime in list(data):
        text = data[mime]
        if len(text) <= _TEXT_CHARS:
            continue
        if mime.startswith("text/") or mime == "image/svg+xml":
            data[mime] = _cut(text)
        elif len(text) > _DATA_CHARS:
            del data[mime]
            notes.append("[%s output of %d characters dropped by Agent Bridge: over the limit of %d]" % (mime, len(text), _DATA_CHARS))
    if notes:
        data["text/plain"] = "\n".join([data["text/plain"]] + notes if "text/plain" in data else notes)
    return data


def _bundle(formatted):
    """A {mime: data} dict (str, bytes or JSON data) as the protocol's {mime: str}."""
    data = {}
    for mime, item in formatted.items():
        text = _mime_text(str(mime), item)
        if text is not None:
            data[str(mime)] = text
    return data


def _send_display(formatted, metadata=None, execution_count=None):
    """IPython's display_data / execute_result, within the output caps."""
    msg = {"type": "display", "id": _run_id, "data": _capped(_bundle(formatted))}
    if metadata:
        try:
            json.dumps(metadata)
            msg["metadata"] = metadata
        except (TypeError, ValueError):
            pass  # metadata only tunes the rendering: an output without it is still whole
    if execution_count is not None:
        msg["execution_count"] = execution_count
    _send(msg)


def _mimebundle(value):
    """Jupyter's display protocol, within the output caps."""
    if type(value) in _PLAIN_TYPES:
        return {"text/plain": _plain_repr(value)}
    return _capped(_rich_bundle(value))


def _rich_bundle(value):
    """_repr_mimebundle_ wins over the single _repr_*_ methods."""
    data = {}
    # Classes have the methods unbound; objects answering every attribute (mocks) are not displayable.
    if not isinstance(value, type) and _getattr(value, "_agent_bridge_no_such_attribute_") is None:
        method = _getattr(value, "_repr_mimebundle_")
        if callable(method):
            try:
                bundle = method(include=None, exclude=None)
                if isinstance(bundle, tuple):
                    bundle = bundle[0] if bundle else None
                if isinstance(bundle, dict):
                    data.update(_bundle(bundle))
            except Exception:
                pass
        for mime, name in _REPR_METHODS:
            if mime in data:
                continue
            method = _getattr(value, name)
            if callable(method):
                try:
                    text = _mime_text(mime, method())
                except Exception:
                    continue
                if text is not None:
                    data[mime] = text
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(value)
        except Exception as e:
            data["text/plain"] = "<%s object (repr failed: %s)>" % (type(value).__name__, type(e).__name__)
    return data


def _show_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = list(plt.get_fignums())
    except Exception:
        return
    for num in nums:
        try:
            fig = plt.figure(num)
            out = io.BytesIO()
            fig.savefig(out, format="png", bbox_inches="tight")
            data = {"image/png": base64.b64encode(out.getvalue()).decode("ascii"), "text/plain": repr(fig)}
        except Exception as e:
            _stderr.write("Could not render figure %s: %s: %s\n" % (num, type(e).__name__, e))
            continue
        _send({"type": "display", "id": _run_id, "data": _capped(data)})
    try:
        plt.close("all")
    except Exception:
        pass


# ---- running code -------------------------------------------------------------------------------

def _compile(code, filename):
    """Returns (body, trailing expression or None) code objects; either may be a coroutine."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST | flags, dont_inherit=True)
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
    own = _execute.__code__.co_filename
    while tb is not None and tb.tb_frame.f_code.co_filename == own:
        tb = tb.tb_next
    return tb


def _trim_kernel_tail(tb):
    """Cuts the kernel's own frames off the end of a traceback (an interrupt is raised in
    _on_sigint, or in the writer that deferred it), so it ends in the code the person ran."""
    own = _execute.__code__.co_filename
    prev, t = None, tb
    while t is not None:
        if prev is not None and t.tb_frame.f_code.co_filename == own and prev.tb_frame.f_code.co_filename != own:
            prev.tb_next = None
            break
        prev, t = t, t.tb_next
    return tb


def _error_message(e, text):
    try:
        message = str(e)
    except Exception:
        message = ""
    return {"type": "error", "id": _run_id, "name": type(e).__name__, "message": _cut(message), "traceback": _cut(text)}


def _run_ipython(code, filename, cell, ns):
    """Runs through IPython, which reports errors itself; returns (success, value, execution count)."""
    global _executing
    _executing = True
    try:
        if cell:
            succeeded, execution_count = _ipython.run_cell(code)
            return succeeded, None, execution_count
        succeeded, value = _ipython.run_scratchpad(code, filename, ns)
        return succeeded, value, None
    finally:
        _executing = False


def _code_name(cell):
    """A cell's filename in tracebacks: `Cell In[n]`, n the execution count of its run, as IPython
    names a cell; the editor shows that count, the file saves it and the bridge's answers give it."""
    if isinstance(cell, dict) and isinstance(cell.get("count"), int):
        return "Cell In[%d]" % cell["count"]
    return "<cell>"


def _execute(req):
    """Runs one request to its `done`. Re-entrant: a run nested in a host call of another keeps
    its own id, streams and code-mode visibility, and gives the caller's back when it ends."""
    global _run_id, _executing, _interrupt_pending, _run_fds
    run_id = req.get("id")
    code = req.get("code")
    if not isinstance(code, str):
        code = ""
    cell = req.get("mode") != "scratchpad"
    filename = _code_name(req.get("cell")) if cell else "<scratchpad>"
    outer_id = _run_id
    outer_streams = (sys.stdout, sys.stderr)
    if outer_id is not None:
        _locked_flush_then(None)  # the caller's buffered output leaves under the caller's id
    _run_id = run_id
    _interrupt_pending = False
    outer_fds = _run_fds
    _run_fds = _open_run_fds(run_id)
    sys.stdout, sys.stderr = _stdout, _stderr  # undo redirections a previous run leaked
    if _getsignal(signal.SIGINT) is not _on_sigint:
        signal.signal(signal.SIGINT, _on_sigint)
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
    try:
        if _ipython is not None:
            succeeded, value, execution_count = _run_ipython(code, filename, cell, ns)
        else:
            body, last = _compile(code, filename)
            compiled = True
            _executing = True
            try:
                if body is not None:
                    _run_code(body, ns)
                if last is not None:
                    result = _run_code(last, ns)
                    if result is not None:
                        if cell:
                            ns["_"] = result
                        value = _mimebundle(result)
                _show_figures()
            finally:
                _executing = False
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
        _send(error)
    if _run_fds is not None:
        _run_fds.close(outer_fds)  # what subprocesses wrote arrives before the run's done
    _run_fds = outer_fds
    failed = run_id in _failed_runs
    _failed_runs.discard(run_id)
    done = {"type": "done", "id": run_id, "success": succeeded and error is None and not failed, "value": value}
    if execution_count is not None:
        done["execution_count"] = execution_count
    _send(done)
    _run_id = outer_id
    if outer_id is not None:
        sys.stdout, sys.stderr = outer_streams


# ---- process setup ------------------------------------------------------------------------------

def _read_requests(fd):
    with open(fd, "rb") as f:
        for line in f:
            try:
                msg = json.loads(line)
                op = msg.get("op")
            except (ValueError, AttributeError):
                os.write(2, b"agent-bridge kernel: ignoring a malformed request line\n")
                continue
            if op == "execute":
                _inbox.append(msg)
                _inbox_wake.set()
            elif op == "reply":
                _deliver_reply(msg)
            elif op == "inspect" and _inspect is not None:
                _inspect.serve(msg, _user_ns, _hidden_names(), _send, _start_untagged)
    _real_exit(0)  # host closed the channel: it is gone or wants us gone


def _hidden_names():
    """Names the shell binds for itself (In, Out, exit...): not the user's variables."""
    return getattr(getattr(_ipython, "shell", None), "user_ns_hidden", None) or ()


def _start_untagged(thread):
    thread._agent_bridge_run = None  # what it prints belongs to no run
    _thread_start(thread)


def _start_thread(target, *args):
    def run():
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # SIGINT must reach the main thread
        target(*args)

    thread = threading.Thread(target=run, daemon=True, name="agent-bridge-" + target.__name__.strip("_"))
    thread._agent_bridge_run = _ANY_RUN
    _thread_start(thread)


def _after_fork_in_child():
    global _msg_fd, _lock, _lock_holder
    _msg_fd = -1
    _lock = threading.Lock()  # another thread may have held the parent's at fork time
    _lock_holder = None
    _buf.clear()
    _late.clear()
    sys.stdout = sys.__stdout__ or sys.stdout
    sys.stderr = sys.__stderr__ or sys.stderr


def _setup_user_namespace():
    # A real __main__ module holds the user's globals, so pickle and friends find what cells define.
    main = types.ModuleType("__main__")
    main.__dict__.update({"__builtins__": builtins, "__loader__": None, "__spec__": None, "__package__": None})
    sys.modules["__main__"] = main
    return main.__dict__


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


def _start_ipython():
    """Readable tables on both paths; IPython's shell when this Python has IPython."""
    global _ipython, _text, _inspect
    try:
        _inspect = _load_beside("kernel_inspect.py", "_agent_bridge_inspect")
    except Exception as e:
        _stderr.write("Agent Bridge: kernel_inspect.py could not be loaded (%s: %s)\n" % (type(e).__name__, e))
    try:
        _text = _load_beside("kernel_text.py", "_agent_bridge_text")
        _text.widen_tables()
    except Exception as e:
        _text = None
        _stderr.write("Agent Bridge: kernel_text.py could not be loaded (%s: %s)\n" % (type(e).__name__, e))
    if os.environ.get("AGENT_BRIDGE_IPYTHON") == "0":
        return
    try:
        module = _load_beside("kernel_ipython.py", "_agent_bridge_ipython")
    except ImportError as e:
        if getattr(e, "name", None) != "IPython":  # IPython is there but broken: say so
            _stderr.write("Agent Bridge: IPython could not be imported, running plain Python (%s)\n" % e)
        return
    except Exception as e:
        _stderr.write("Agent Bridge: IPython could not be loaded, running plain Python (%s: %s)\n" % (type(e).__name__, e))
        return
    hooks = types.SimpleNamespace(
        display=_send_display,
        error=lambda name, message, text: _send({"type": "error", "id": _run_id, "name": name, "message": _cut(message), "traceback": _cut(text)}),
        show_figures=_show_figures,
        trim_traceback=_trim_kernel_tail,
        own_frames=_own_frames_stripped,
        compile=_compile,
        run_code=_run_code,
        run_coroutine=_run_coroutine,
        bundle=lambda formatted: _capped(_bundle(formatted)),
        plain_repr=_plain_repr,
        text_width=_text.TEXT_WIDTH if _text is not None else 120,
    )
    try:
        _ipython = module.Shell(sys.modules["__main__"], hooks)
    except Exception as e:
        _stderr.write("Agent Bridge: IPython could not be started, running plain Python (%s: %s)\n" % (type(e).__name__, e))


def main(argv):
    global _msg_fd, _user_ns, _idle_fds, _pump
    req_fd, msg_fd = int(argv[1]), int(argv[2])
    for fd in (req_fd, msg_fd):
        os.set_inheritable(fd, False)  # os.system() children must not hold the protocol pipes open
    _msg_fd = msg_fd
    try:
        _idle_fds = (os.dup(1), os.dup(2))
    except OSError:
        pass
    try:
        import faulthandler

        # The host's stderr, not the run's pipe (whose reader dies with the kernel): a segfault
        # leaves a Python traceback in the stderr tail the host reports.
        faulthandler.enable(file=_idle_fds[1] if _idle_fds else sys.__stderr__)
    except Exception:
        pass
    threading.Thread.start = _start_tagged
    os._exit = _exit_flushed
    sys.argv = [""]
    # Like `python -c`: modules next to the notebook (the cwd) import, not those next to us.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    sys.path.insert(0, "")
    _user_ns = _setup_user_namespace()
    _install_host_module()
    sys.meta_path.append(_CodeModeFinder)
    sys.stdout, sys.stderr = _stdout, _stderr
    _start_ipython()
    signal.signal(signal.SIGINT, _on_sigint)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    _start_thread(_flusher)
    _start_thread(_read_requests, req_fd)
    if _idle_fds is not None and sys.platform != "win32":  # select() takes no pipes on Windows
        try:
            _pump = _FdPump()
        except (ImportError, OSError):
            pass
    ipython = getattr(sys.modules.get("_agent_bridge_ipython"), "version", None) if _ipython is not None else None
    _send({"type": "ready", "pid": os.getpid(), "python": "%d.%d.%d" % sys.version_info[:3], "ipython": ipython})
    while True:
        if _inbox:
            _execute(_inbox.popleft())
        else:
            _inbox_wake.wait()
            _inbox_wake.clear()


if __name__ == "__main__":
    main(sys.argv)
