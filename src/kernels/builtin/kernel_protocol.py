"""The wire between the Agent Bridge builtin kernel and its host (stdlib only, 3.8+).

kernel.py loads this file beside itself and runs code; this module speaks for it. It owns the
state the two share: the current run (its id, its fds 1/2, whether its code may be interrupted)
and the lock that keeps messages in order. One JSON object per line, UTF-8, on each channel:

  host -> kernel (the request fd)
    {"op":"execute","id":int,"code":str,"mode":"cell"|"scratchpad"[,"cell":{"count":int}]}
    {"op":"reply","rid":int,"result":any}  |  {"op":"reply","rid":int,"error":str[,"interrupt":true][,"refused":true]}
    {"op":"inspect","qid":int,"query":{"kind":"variables"|"variable"|"analyze",...}}  (kernel_inspect.py)
  kernel -> host (the message fd)
    {"type":"ready","pid":int,"python":"3.11.7","ipython":"8.5.0"|null}  once, at start
    {"type":"stream","id":int|null,"name":"stdout"|"stderr","text":str}  id: the run that wrote it (null: none)
    {"type":"display","id":int,"data":{mime:str}[,"metadata":{}][,"execution_count":int]}
    {"type":"error","id":int,"name":str,"message":str,"traceback":str}
    {"type":"done","id":int,"success":bool,"value":{mime:str}|null[,"execution_count":int]}  ends every run
    {"type":"call","rid":int,"id":int|null,"method":str,"params":any}    answered by a reply; id: the run
      that made the call (a thread's: the run that started it), null: none
    {"type":"inspected","qid":int,"result":{...}}   answers an inspect, even while a run executes

While a run executes, fds 1/2 are pipes of that run (see _RunFds), so OS-level output
(subprocesses, C code) reaches only that run; between runs they are the host's stdout/stderr.

Code calls the host with `import _agent_bridge_host; _agent_bridge_host.call(method, params)`:
it blocks until the reply and returns its result, or raises _agent_bridge_host.HostCallError
(CallRefused, a kind of it, when the bridge refuses the call: the run that made it has ended, or
the person's access mode does not allow it; KeyboardInterrupt when the reply says the calling run
was interrupted). A call names the run that made it, for a thread the run that started it: the
host answers only calls of runs still in flight. While the main thread
waits for a reply, execute requests that arrive are run at once, nested, on the main thread (the
host may answer a call by running cells: they must not queue behind the run that waits for
them). Each run keeps its own id, so its output is routed to it; SIGINT interrupts the innermost
running code. `_agent_bridge_host.fail_run()` makes the current run end with success false.
SIGINT raises KeyboardInterrupt only while a run executes. EOF on the request fd (host gone) exits.
"""

import codecs
import collections
import io
import itertools
import json
import os
import select
import signal
import sys
import threading
import time
import types

try:
    from _signal import getsignal as _getsignal  # signal.getsignal wraps ints in an enum: slow
except ImportError:
    _getsignal = signal.getsignal

_FLUSH_CHARS = 8192  # buffered output above this is sent at once
_FLUSH_DELAY = 0.01  # output waits at most this long, so print loops coalesce
_CHUNK_CHARS = 1 << 20  # one huge write still streams in pieces
_DRAIN_TIMEOUT = 0.2  # how long a run's end waits for output its subprocesses wrote
_DRAIN_QUIET = 0.02  # ... or less, once its pipes were quiet this long

_lock = threading.Lock()  # guards the output buffer and the message fd, so messages keep their order
_lock_holder = None  # ident of the thread inside _lock (see _locked_flush_then)
_late = []  # encoded messages sent from code that ran inside a flush, written when it ends
_msg_fd = -1  # -1 in forked children: only the kernel process may speak the protocol
_main_ident = threading.get_ident()
run_id = None  # the innermost run executing on the main thread (None between runs)
executing = False  # user code may be interrupted; the runner sets it around the code it runs
_io_busy = False  # the main thread is inside _lock: an interrupt now would tear a message
_interrupt_pending = False
_buf = []  # (stream name, text) items not yet sent
_buf_size = 0
_flush_armed = False
_wake_flusher = threading.Event()
_idle_fds = None  # (stdout, stderr): dups of the host's fds 1/2, where OS-level output goes between runs
_run_fds = None  # _RunFds of the innermost run
_real_exit = os._exit
_inbox = collections.deque()  # execute requests not yet started, appended by the reader thread
_inbox_wake = threading.Event()  # set on every request and reply: the main thread may have work
_failed_runs = set()  # ids of runs that fail_run() marked failed
_execute = None  # the runner's: runs one execute request to its done (set by serve)


# ---- messages and output streams ----------------------------------------------------------------

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
    if executing:
        raise KeyboardInterrupt


def send(obj):
    """Sends a message after any buffered output."""
    _locked_flush_then(_encode(obj))


class _OutStream(io.TextIOBase):
    """sys.stdout / sys.stderr. Both share one buffer of (stream, text) items, so their
    interleaving survives coalescing; writers append without a lock (list.append is atomic)
    because a lock per print() is paid by every print loop (SETUP.md, measured figures)."""

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
        _buffer(self._name, s, run_id if _get_ident() == _main_ident else _thread_run())
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
    return run_id if run is _ANY_RUN else run


def _start_tagged(self):
    # A thread's output belongs to the run that started it, not to whichever run is active when
    # it prints: a thread that outlives its run must not write into another client's run.
    self._agent_bridge_run = run_id if _get_ident() == _main_ident else _thread_run()
    _thread_start(self)


stdout = _OutStream("stdout", 1)
stderr = _OutStream("stderr", 2)


def _flusher():
    global _flush_armed
    while True:
        _wake_flusher.wait()
        _wake_flusher.clear()
        time.sleep(_FLUSH_DELAY)
        _flush_armed = False  # a write from here on arms the next round
        _locked_flush_then(None)


def on_sigint(signum, frame):
    global _interrupt_pending
    if not executing:
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


class CallRefused(HostCallError):
    """The bridge refused the call: the run that made it is no longer in flight (a thread or
    subprocess an earlier run left behind), or the person's access mode does not allow it."""


HostCallError.__module__ = CallRefused.__module__ = "_agent_bridge_host"


class _PendingCall(object):
    __slots__ = ("event", "result", "error", "interrupt", "refused")

    def __init__(self):
        self.event = threading.Event()
        self.result = None
        self.error = None
        self.interrupt = False
        self.refused = False


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
    caller = run_id if threading.get_ident() == _main_ident else _thread_run()
    try:
        send({"type": "call", "rid": rid, "id": caller, "method": method, "params": params})
        if threading.get_ident() == _main_ident:
            _serve_until(pending.event)
        else:
            pending.event.wait()
    finally:
        _calls.pop(rid, None)
    if pending.interrupt:
        raise KeyboardInterrupt
    if pending.refused:
        raise CallRefused(pending.error)
    if pending.error is not None:
        raise HostCallError(pending.error)
    return pending.result


def _serve_until(event):
    """Waits on the main thread for `event`, running the execute requests that arrive meanwhile
    (nested runs). An interrupt while waiting raises here, in the caller's code; while a nested
    run starts or ends it is ignored, so a request taken from the inbox always gets its `done`."""
    global executing
    while not event.is_set():
        if _inbox:
            outer = executing
            executing = False
            try:
                _execute(_inbox.popleft())
            finally:
                executing = outer
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
    pending.refused = msg.get("refused") is True
    pending.event.set()
    _inbox_wake.set()


def _fail_run():
    """Makes the current run end with success false (its output and value are kept)."""
    if run_id is not None:
        _failed_runs.add(run_id)


def install_host_module():
    mod = types.ModuleType("_agent_bridge_host", "Synchronous calls from kernel code into the Agent Bridge host.")
    mod.call = _bridge_call
    mod.fail_run = _fail_run
    mod.HostCallError = HostCallError
    mod.CallRefused = CallRefused
    sys.modules["_agent_bridge_host"] = mod


# ---- the current run ----------------------------------------------------------------------------

def enter_run(new_id):
    """Makes `new_id` the current run: its own fds 1/2 and streams, interrupts armed. Returns what
    finish_run gives back to the run it was nested in (if any)."""
    global run_id, _interrupt_pending, _run_fds
    outer = (run_id, _run_fds, sys.stdout, sys.stderr)
    if run_id is not None:
        _locked_flush_then(None)  # the caller's buffered output leaves under the caller's id
    run_id = new_id
    _interrupt_pending = False
    _run_fds = _open_run_fds(new_id)
    sys.stdout, sys.stderr = stdout, stderr  # undo redirections a previous run leaked
    if _getsignal(signal.SIGINT) is not on_sigint:
        signal.signal(signal.SIGINT, on_sigint)
    return outer


def finish_run(outer, done):
    """Sends the run's `done` (success false if fail_run() marked it) after what its subprocesses
    wrote, then makes `outer` (from enter_run) current again."""
    global run_id, _run_fds
    outer_id, outer_fds, outer_stdout, outer_stderr = outer
    if _run_fds is not None:
        _run_fds.close(outer_fds)  # what subprocesses wrote arrives before the run's done
    _run_fds = outer_fds
    if done["id"] in _failed_runs:
        _failed_runs.discard(done["id"])
        done["success"] = False
    send(done)
    run_id = outer_id
    if outer_id is not None:
        sys.stdout, sys.stderr = outer_stdout, outer_stderr


# ---- process setup ------------------------------------------------------------------------------

def open_channel(msg_fd):
    """Speaks the protocol on `msg_fd` from now on, and takes over os._exit and thread starts so
    output reaches its run. Returns the dups of the host's fds 1/2 (None if they cannot be made)."""
    global _msg_fd, _idle_fds
    _msg_fd = msg_fd
    try:
        _idle_fds = (os.dup(1), os.dup(2))
    except OSError:
        pass
    threading.Thread.start = _start_tagged
    os._exit = _exit_flushed
    return _idle_fds


def serve(req_fd, ready, execute, inspect):
    """Reads requests from `req_fd`, sends `ready` and runs execute requests with `execute` on the
    main thread until the host goes; `inspect` (None: not offered) answers inspect requests."""
    global _execute, _pump
    _execute = execute
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    _start_thread(_flusher)
    _start_thread(_read_requests, req_fd, inspect)
    if _idle_fds is not None and sys.platform != "win32":  # select() takes no pipes on Windows
        try:
            _pump = _FdPump()
        except (ImportError, OSError):
            pass
    send(ready)
    while True:
        if _inbox:
            execute(_inbox.popleft())
        else:
            _inbox_wake.wait()
            _inbox_wake.clear()


def _read_requests(fd, inspect):
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
            elif op == "inspect" and inspect is not None:
                inspect(msg)
    _real_exit(0)  # host closed the channel: it is gone or wants us gone


def start_untagged(thread):
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
