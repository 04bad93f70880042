"""Runs a script's command line in a forked child of a process that has already imported torch.

The refusal tests start a script hundreds of times only to see it stop at its input checks, and each
fresh interpreter spends seconds importing torch. Here one server process per test worker imports the
heavy libraries once; every request forks a child that does what `python SCRIPT ARGS...` would do —
`sys.argv` set, the working directory and environment of the request, NumPy's and torch's global
generators seeded from fresh entropy, `runpy.run_path(..., run_name="__main__")`, SystemExit and uncaught
exceptions turned into exit codes as the interpreter does, threads that are not daemons waited for and
atexit handlers run — with file descriptors 1 and 2 written to files, so output from C code counts too.
A request either waits for the script's end (`run`) or leaves it running (`start`: a `ForkedProcess`,
signalled by its pid, for the tests that stop a run). The server imports no gymnasium plugin and no
script, so env registrations (ale-py's, MuJoCo's) happen in the child exactly as in a fresh process.
What the server's imports read from the environment when they load (torch's and JAX's settings) is
fixed at the server's start: conftest's `run_script` starts a fresh interpreter for a request that
changes such a variable. Known differences, which no test relies on: the objects of the script's
module are not finalised at exit (no `__del__`), its own `sys.excepthook` is not called, a traceback
carries runpy's frames, and `sys.orig_argv` is the server's.
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

SERVER = r"""
import atexit, json, os, runpy, signal, sys, threading, time, traceback
import numpy, torch, tyro, gymnasium  # the slow imports, paid once
from torch.utils.tensorboard import SummaryWriter  # noqa: F401
try:  # the JAX scripts' libraries; importing them starts no thread (their backend starts on first use, in a child)
    import jax, flax.linen, flax.serialization, optax  # noqa: F401
except ImportError:
    pass

def child(request, out_path, err_path):
    # a fresh interpreter's generators start from fresh entropy: so must a fork's, or every run would share the server's
    # draws and a script that forgot to seed would look seeded (Python's `random` reseeds itself at fork)
    numpy.random.seed()
    torch.seed()
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the server's request pipe, for the script or its children
    sys.stdin = open(os.devnull)
    os.chdir(request["cwd"])
    for name in request["unset"]:
        os.environ.pop(name, None)
    os.environ.update(request["env"])
    sys.argv = [request["script"], *request["args"]]
    sys.path[0] = os.path.dirname(request["script"])
    # a fresh interpreter puts $PYTHONPATH's folders after the script's (a researcher's `module:EnvId` lives there)
    sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    code = 0
    try:
        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:
        traceback.print_exc()
        code = -signal.SIGINT if isinstance(e, KeyboardInterrupt) else 1
    try:
        threading._shutdown()  # as the interpreter does at exit: wait for the threads that are not daemons
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if code == -signal.SIGINT:  # as the interpreter ends on an uncaught KeyboardInterrupt: killed by SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)

def wait(pid, timeout, kill):  # the exit code; None at the timeout (the child killed first if `kill`)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            if kill:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            return None
        time.sleep(0.01)

started = set()
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "wait":  # on a started child: its exit code, or None while it still runs
        returncode = wait(request["pid"], request["timeout"], kill=False)
        if returncode is not None:
            started.discard(request["pid"])  # reaped: its pid may be another process's from now on
        print(json.dumps({"returncode": returncode}), flush=True)
        continue
    pid = os.fork()
    if pid == 0:
        child(request, request["stdout"], request["stderr"])
    if request["op"] == "start":  # the caller signals it by its pid and asks for its end with "wait"
        started.add(pid)
        print(json.dumps({"pid": pid}), flush=True)
    else:
        print(json.dumps({"returncode": wait(pid, request["timeout"], kill=True)}), flush=True)
for pid in started:  # the test worker is done: a started script it left running (a failed test's) ends with it
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
"""


class ScriptForker:
    """One server process (of `python`: this interpreter by default); `run(script_path, args, cwd, env, timeout, unset)`
    returns an object with
    `returncode` (None after a timeout), `stdout` and `stderr`, like `subprocess.run(..., text=True)`."""

    def __init__(self, env, python=sys.executable):
        self.env = env
        self.scratch = tempfile.TemporaryDirectory(prefix="forked-scripts-")
        self.process = subprocess.Popen(
            [str(python), "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
        )
        self.outputs = itertools.count()

    def run(self, script_path, args, cwd, env=None, timeout=120, unset=()):
        """`env` adds to (or overrides) the server's environment; the variables named in `unset` are removed."""
        request = self._request("run", script_path, args, cwd, env, unset, timeout=timeout)
        returncode = self._ask(request)["returncode"]
        with open(request["stdout"]) as f_out, open(request["stderr"]) as f_err:
            result = SimpleNamespace(returncode=returncode, stdout=f_out.read(), stderr=f_err.read())
        os.unlink(request["stdout"])  # read whole: a session's hundreds of runs leave no files behind
        os.unlink(request["stderr"])
        return result

    def start(self, script_path, args, cwd, env=None, unset=()):
        """The script started and left running, as `subprocess.Popen` with both outputs piped: a `ForkedProcess`."""
        request = self._request("start", script_path, args, cwd, env, unset)
        for path in (request["stdout"], request["stderr"]):  # there to read before the child has opened them
            open(path, "w").close()
        return ForkedProcess(self, self._ask(request)["pid"], request["stdout"], request["stderr"])

    def _request(self, op, script_path, args, cwd, env, unset, **more):
        n = next(self.outputs)  # each its own files: a started script may still write while another runs
        return {
            "op": op,
            "script": str(script_path),
            "args": [str(a) for a in args],
            "cwd": str(cwd),
            "env": {k: v for k, v in (env or {}).items() if self.env.get(k) != v},
            "unset": list(unset),
            "stdout": os.path.join(self.scratch.name, f"stdout-{n}"),
            "stderr": os.path.join(self.scratch.name, f"stderr-{n}"),
            **more,
        }

    def _ask(self, request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the script-forking server died (exit {self.process.poll()})")
        return json.loads(reply)

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.scratch.cleanup()


class ForkedProcess:
    """A script that `ScriptForker.start` left running, with what the tests use of `subprocess.Popen`: `pid`,
    `returncode`, `poll`, `wait`, `send_signal`, `kill`, `communicate`, and `stdout` and `stderr` read as pipes are
    (a line once the script has written all of it, or what is left once it has ended)."""

    def __init__(self, forker, pid, out, err):
        self.forker, self.pid, self.returncode = forker, pid, None
        self.stdout, self.stderr = _Followed(open(out), self), _Followed(open(err), self)

    def poll(self):
        if self.returncode is None:
            self.returncode = self.forker._ask({"op": "wait", "pid": self.pid, "timeout": 0})["returncode"]
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            request = {"op": "wait", "pid": self.pid, "timeout": 10**9 if timeout is None else timeout}
            self.returncode = self.forker._ask(request)["returncode"]
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"forked script (pid {self.pid})", timeout)
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is None:  # as Popen: an ended (and reaped) process gets no signal
            os.kill(self.pid, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        self.wait(timeout)
        return self.stdout.read(), self.stderr.read()  # what is left, as from a pipe; the files are closed then


class _Followed:
    """A file a running script writes, read as a pipe: `readline` waits for a whole line while the script runs."""

    def __init__(self, file, process):
        self.file, self.process = file, process

    def readline(self):
        line = self.file.readline()
        while not line.endswith("\n"):
            if self.process.poll() is not None:
                return line + self.file.readline()
            time.sleep(0.01)
            line += self.file.readline()
        return line

    def __iter__(self):
        while line := self.readline():
            yield line

    def read(self):
        if self.file.closed:
            return ""
        rest = self.file.read()
        self.file.close()
        return rest
