"""The Python tests' fork server (test infrastructure; docs/testing.md, "The fork servers").

Every tests/python/test_*.py process pays ~1.4 s of CPU to `import vocablens` (torch's Python package and
LibTorch) before its first check. This server imports them once; CTest runs each test file as
`vl_test_client SOCKET python3 test_X.py` (tests/support/fork_client.cpp), and a forked worker of the server runs
the file as `python3 test_X.py` would: the client's fds 0/1/2, cwd, umask, lowered resource limits, ignored and
blocked signals and environment (the same wire as the C++ servers: tests/support/fork_wire.hpp), sys.argv and
sys.path[0] as the interpreter sets them, the file run as __main__, then the interpreter's own exit (atexit
handlers, non-daemon threads joined, streams flushed; an uncaught exception printed, exit 1).

    python3 fork_server.py start SOCKET PIDFILE IDLE_SECONDS   returns once the server listens
    (stopped by `vl_test_client --stop SOCKET PIDFILE python3`, or SIGTERM, or IDLE_SECONDS without a run)

What a worker cannot reproduce makes the client run the real interpreter instead: variables read when the
interpreter or the libraries start (PYTHON*, OMP_*, OPENBLAS_*, LD_*, MALLOC_*, ...) that differ from the
server's, a request for another interpreter or with options before the script, a rebuilt vocablens module.
"""
import atexit
import ctypes
import os
import runpy
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

# tests/support/fork_wire.hpp
MAGIC = 0x766C6331
STARTED, FALL_BACK, EXITED = 1, 2, 3
LIMIT_NAMES = ["RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CPU", "RLIMIT_STACK", "RLIMIT_CORE"]
REQUEST = struct.Struct("=6I3Q%dQ%dQ" % (len(LIMIT_NAMES), len(LIMIT_NAMES)))
MESSAGE = struct.Struct("=Ii")
LOAD_TIME = ("PYTHON", "LANG", "LC_", "OMP_", "GOMP_", "KMP_", "OPENBLAS_", "GOTO", "MKL_", "BLIS_", "DNNL_", "ONEDNN_", "LD_",
             "MALLOC_", "GLIBC_TUNABLES", "TORCH_", "PYTORCH_", "ASAN_", "UBSAN_", "LSAN_", "TSAN_", "MSAN_")


def load_time_environment(env):
    return {k: v for k, v in env.items() if k.startswith(LOAD_TIME)}


def send(conn, kind, value):
    try:
        conn.sendall(MESSAGE.pack(kind, value))
        return True
    except OSError:
        return False


def read_exact(conn, n, first=b""):
    data = bytearray(first)
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def module_files():
    """The vocablens extension's file and its modification time: a rebuild makes the server stale."""
    import vocablens._vocablens as ext
    return ext.__file__, os.stat(ext.__file__).st_mtime_ns


def become_worker(req, fds, argv, env):
    """In the session's fork: become `python3 SCRIPT ARGS...` as the client's caller started it, run it, exit."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the session gone, so is this
    magic, fd_bits, umask, argc, envc, _, _, ignored, blocked = req[:9]
    cur, mx = req[9:9 + len(LIMIT_NAMES)], req[9 + len(LIMIT_NAMES):]
    k = 0
    for fd in range(3):
        if fd_bits & (1 << fd):
            os.dup2(fds[k], fd)
            k += 1
        else:
            os.close(fd)
    os.fchdir(fds[k])
    os.closerange(3, 65536)
    os.umask(umask)
    import resource
    inf = resource.RLIM_INFINITY

    def as_number(v):  # RLIM_INFINITY (-1 in Python, 2**64 - 1 on the wire) as +infinity
        return float("inf") if v == inf or v >= 2**63 else v

    for i, name in enumerate(LIMIT_NAMES):  # the caller's limits where lower than the server's (only lowering works)
        which = getattr(resource, name)
        have = resource.getrlimit(which)
        want = [min(as_number(cur[i]), as_number(have[0])), min(as_number(mx[i]), as_number(have[1]))]
        want[0] = min(want[0], want[1])
        want = tuple(inf if w == float("inf") else int(w) for w in want)
        if want != have:
            resource.setrlimit(which, want)
    # Dispositions as a fresh interpreter has them: default, except what the caller ignored; Python's own
    # SIGINT handler (KeyboardInterrupt) unless ignored; SIGPIPE and SIGXFSZ ignored, as CPython's start does.
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP) or not 0 < sig < 64:
            continue
        try:
            signal.signal(sig, signal.SIG_IGN if ignored >> (sig - 1) & 1 else signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    if not ignored >> (signal.SIGINT - 1) & 1:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [s for s in signal.valid_signals() if 0 < s < 64 and blocked >> (s - 1) & 1])
    os.environ.clear()
    os.environ.update(env)
    script = argv[1]
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        # As the interpreter prints it: the script's frames only (not runpy's, not this file's).
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, runpy.__file__, "<frozen runpy>"):
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        code = 1
        if isinstance(e, KeyboardInterrupt):  # CPython ends by SIGINT then
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    try:
        threading._shutdown()  # joins non-daemon threads, as the interpreter's exit does
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
        code = code or 1
    os._exit(code & 0xFF)


def run_session(conn, server_env, interpreter, stale):
    """One connection: read the request, fork the worker, report its pid and its end."""
    msg, anc, _, _ = conn.recvmsg(REQUEST.size, socket.CMSG_SPACE(4 * 4))
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack("%di" % (len(data) // 4), data[:len(data) - len(data) % 4]))
    data = read_exact(conn, REQUEST.size, msg)
    if data is None:
        os._exit(0)
    req = REQUEST.unpack(data)
    magic, fd_bits, _, argc, envc, _, payload_size = req[:7]
    if magic != MAGIC or len(fds) != bin(fd_bits & 7).count("1") + 1 or argc < 2 or payload_size > (64 << 20):
        send(conn, FALL_BACK, 1)
        os._exit(0)
    payload = read_exact(conn, payload_size)
    if payload is None:
        os._exit(0)
    strings = [s.decode("utf-8", "surrogateescape") for s in payload.split(b"\0")[:-1]]
    if len(strings) != argc + envc:
        send(conn, FALL_BACK, 1)
        os._exit(0)
    argv, env_list = strings[:argc], strings[argc:]
    env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env_list)
    why = None
    if os.path.realpath(argv[0]) != interpreter or argv[1].startswith("-"):
        why = "not `%s SCRIPT`" % interpreter
    elif load_time_environment(env) != server_env:
        mine = load_time_environment(env)
        why = "%s differs from the server's" % sorted(k for k in set(mine) | set(server_env) if mine.get(k) != server_env.get(k))[0]
    elif stale():
        why = "the vocablens module was rebuilt"
    if why:
        print("python fork server: ran the real interpreter for %s: %s" % (argv[1:2], why), file=sys.stderr, flush=True)
        send(conn, FALL_BACK, 2)
        os._exit(0)
    worker = os.fork()
    if worker == 0:
        conn.close()
        become_worker(req, fds, argv, env)
    for fd in fds:
        os.close(fd)
    if not send(conn, STARTED, worker):
        os.kill(worker, signal.SIGKILL)
        os.waitpid(worker, 0)
        os._exit(0)
    pidfd = os.pidfd_open(worker)
    while True:
        ready, _, _ = select.select([conn, pidfd], [], [])
        if pidfd in ready:
            break
        if conn in ready:
            try:
                gone = conn.recv(256, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:  # the client is gone: nobody waits for this run any more
                os.kill(worker, signal.SIGKILL)
                os.waitpid(worker, 0)
                os._exit(0)
    _, status = os.waitpid(worker, 0)
    send(conn, EXITED, status)
    os._exit(0)


def serve(listener, socket_path, pid_file, idle_seconds):
    server_env = load_time_environment(os.environ)
    interpreter = os.path.realpath(sys.executable)
    ext, mtime = module_files()

    def stale():
        try:
            return os.stat(ext).st_mtime_ns != mtime
        except OSError:
            return True

    class Stop(Exception):
        pass

    def on_stop(*_):
        raise Stop()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_stop)
    try:
        loop(listener, idle_seconds, server_env, interpreter, stale)
    except Stop:
        pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    listener.close()
    try:
        with open(pid_file) as f:
            mine = int(f.read().strip() or -1) == os.getpid()
    except (OSError, ValueError):
        mine = False
    if mine:
        for p in (socket_path, pid_file):
            try:
                os.unlink(p)
            except OSError:
                pass


def loop(listener, idle_seconds, server_env, interpreter, stale):
    """Accept, fork a session per connection, reap them; returns when idle or the module was rebuilt."""
    last = time.monotonic()
    sessions = 0
    while True:
        try:
            while sessions > 0 and os.waitpid(-1, os.WNOHANG)[0] > 0:
                sessions -= 1
        except ChildProcessError:
            sessions = 0
        if sessions > 0:
            last = time.monotonic()
        if time.monotonic() - last >= idle_seconds or stale():
            return
        ready, _, _ = select.select([listener], [], [], 1.0)
        if not ready:
            continue
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        last = time.monotonic()
        session = os.fork()
        if session == 0:
            listener.close()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            try:
                run_session(conn, server_env, interpreter, stale)
            except BaseException:
                traceback.print_exc()
            os._exit(0)
        sessions += 1
        conn.close()


def start(socket_path, pid_file, idle_seconds):
    """Replaces the server of pid_file with a new daemon; returns 0 once it listens."""
    try:
        with open(pid_file) as f:
            old = int(f.read().strip())
        with open("/proc/%d/cmdline" % old, "rb") as f:
            if os.path.basename(__file__).encode() in f.read():
                os.kill(old, signal.SIGTERM)
                for _ in range(1000):
                    if not os.path.exists("/proc/%d" % old):
                        break
                    time.sleep(0.01)
    except (OSError, ValueError):
        pass
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child > 0:
        os.close(ready_w)
        ok = os.read(ready_r, 1) == b"\1"
        os.waitpid(child, 0)
        if not ok:
            print("python fork server: the server did not start (see %s.log)" % socket_path, file=sys.stderr)
        return 0 if ok else 1
    os.close(ready_r)
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(socket_path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(log, 2)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    try:
        # What every test imports first; anything that starts a thread here would be missing in the workers.
        import numpy  # noqa: F401
        import torch  # noqa: F401
        import vocablens  # noqa: F401
        try:
            os.unlink(socket_path)
        except OSError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if len(os.fsencode(socket_path)) < 108:
            listener.bind(socket_path)
        else:  # longer than sun_path: through the directory, as fork_wire.hpp's socket_address does
            d = os.open(os.path.dirname(socket_path) or ".", os.O_PATH | os.O_DIRECTORY)
            listener.bind("/proc/self/fd/%d/%s" % (d, os.path.basename(socket_path)))
            os.close(d)
        listener.listen(64)
        with open(pid_file, "w") as f:
            f.write("%d\n" % os.getpid())
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    os.write(ready_w, b"\1")
    os.close(ready_w)
    serve(listener, socket_path, pid_file, idle_seconds)
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "start":
        sys.exit(start(sys.argv[2], sys.argv[3], max(1, int(sys.argv[4]))))
    print("usage: fork_server.py start SOCKET PIDFILE IDLE_SECONDS", file=sys.stderr)
    sys.exit(2)
