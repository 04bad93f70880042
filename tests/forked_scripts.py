"""Runs a script's command line in a forked child of a process that has already imported torch.

The refusal tests start a script hundreds of times only to see it stop at its input checks, and each
fresh interpreter spends seconds importing torch. Here one server process per test worker imports the
heavy libraries once; every request forks a child that does what `python SCRIPT ARGS...` would do —
`sys.argv` set, the working directory and environment of the request, `runpy.run_path(...,
run_name="__main__")`, SystemExit and uncaught exceptions turned into exit codes as the interpreter
does, atexit handlers run — with file descriptors 1 and 2 written to files, so output from C code
counts too. The server imports no gymnasium plugin and no script, so env registrations (ale-py's,
MuJoCo's) happen in the child exactly as in a fresh process. What the server's imports read from the
environment when they load (torch's and JAX's settings) is fixed at the server's start: conftest's
`run_script` starts a fresh interpreter for a request that changes such a variable.
"""

import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

SERVER = r"""
import atexit, json, os, runpy, signal, sys, time, traceback
import numpy, torch, tyro, gymnasium  # the slow imports, paid once
from torch.utils.tensorboard import SummaryWriter  # noqa: F401
try:  # the JAX scripts' libraries; importing them starts no thread (their backend starts on first use, in a child)
    import jax, flax.linen, flax.serialization, optax  # noqa: F401
except ImportError:
    pass

def child(request, out_path, err_path):
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
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if code == -signal.SIGINT:  # as the interpreter ends on an uncaught KeyboardInterrupt: killed by SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request, request["stdout"], request["stderr"])
    deadline = time.monotonic() + request["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            returncode = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            returncode = None
            break
        time.sleep(0.01)
    print(json.dumps({"returncode": returncode}), flush=True)
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

    def run(self, script_path, args, cwd, env=None, timeout=120, unset=()):
        """`env` adds to (or overrides) the server's environment; the variables named in `unset` are removed."""
        out, err = os.path.join(self.scratch.name, "stdout"), os.path.join(self.scratch.name, "stderr")
        request = {
            "script": str(script_path),
            "args": [str(a) for a in args],
            "cwd": str(cwd),
            "env": {k: v for k, v in (env or {}).items() if self.env.get(k) != v},
            "unset": list(unset),
            "timeout": timeout,
            "stdout": out,
            "stderr": err,
        }
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError(f"the script-forking server died (exit {self.process.poll()})")
        with open(out) as f_out, open(err) as f_err:
            return SimpleNamespace(returncode=json.loads(reply)["returncode"], stdout=f_out.read(), stderr=f_err.read())

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.scratch.cleanup()
