"""Checkpoints, `--resume` and clean stops for the scripts in `cleanrl/` (script contract §1 and §5).

A script imports this module only when its run checkpoints or resumes (`--checkpoint-every N` or `--resume PATH`),
as it imports the Hub upload only under `--upload-model`; a script copied alone runs without it. The script says
what its training state is and where its loop takes a checkpoint; the mechanics are here:

    ckpt = Checkpoint(SCRIPT, args)        # right after tyro.cli: --resume puts the saved flags in `args`
    run_name = ckpt.run_name               # a resumed run goes on in its own folder and log
    ...                                    # the writer, the envs, the networks, the optimizers, global_step = 0
    ckpt.start(writer, envs, globals(), "agent optimizer global_step")  # --resume: loaded back, counters rebound
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        ...
        ckpt.step(iteration, last=iteration == args.num_iterations)  # at the cadence, at the end, after a signal

What a checkpoint holds (`runs/{run_name}/checkpoint.pt`, one `torch.save` file written atomically):
- the training state (the script's globals that `start` names), each entry by its kind: anything with `state_dict()`
  and `load_state_dict()` (networks, optimizers; loaded in place), a torch tensor (copied back in place, e.g. SAC's
  log α), a flax struct such as a `TrainState` (restored into a new one: the script rebinds it), an object of the
  script's own such as its `ReplayBuffer` (its attributes, put back in place), a list or tuple holding such entries
  (each item by its own kind, e.g. the running statistics of every sub-env's normalisation wrapper; rebound as a new
  list or tuple of the items restored), or a plain value (counters, JAX keys, NumPy arrays; rebound in the script).
  The replay memory is the entry named `rb`; with `args.checkpoint_memory` False it is left out, and a resumed run
  says in one line that it starts with an empty one.
- every random generator the script draws from: Python's `random`, NumPy's global one, torch's CPU and CUDA ones,
  and the vector env's action spaces (`envs.action_space`, `envs.single_action_space`). JAX keys are state entries.
  The envs themselves start new episodes on a resume (the scripts reset them with `seed + global_step`).
- the flags (`dataclasses.asdict(args)`), the run name, the W&B run id, `global_step`, the cadence's count and
  whether training had finished.

A resumed run films its episodes from number 0 again: the videos of the run so far move into
`videos/{run_name}/until-global_step-{N}/` (and the same under `-eval`) instead of being written over.

NumPy and JAX arrays are written as torch tensors that share their memory, so a replay memory of several GiB is
written at disk speed without a copy (pickled NumPy arrays took 18x as long and 5x the memory).

Ctrl-C or SIGTERM in training sets a flag and says at once, in one line, that the run stops after the step under
way and what a second signal would lose; at the next `step()` the run writes its checkpoint, closes its log, envs
and W&B run, prints one line saying what was kept and how to go on, and exits with 130 (SIGINT) or 143 (SIGTERM).
A second signal, or one after training, stops the run at once.

Where a run folder outlives its machine (a cloud job: `CLEANRL_RUN_STORE`, set by `cleanrl_utils/submit.py`),
`cleanrl_utils/run_store.py` fetches the job's run folder when an attempt starts and pushes it after each checkpoint.
"""

import dataclasses
import functools
import importlib
import os
import random
import shlex
import signal
import sys
import zipfile

import numpy as np
import torch

FORMAT = "cleanrl checkpoint"  # the mark of a file this module wrote
VERSION = 1
FILE = "checkpoint.pt"
MEMORY = "rb"  # the state entry that is the replay memory
STORE = "CLEANRL_RUN_STORE"  # where run folders outlive their machine (cloud jobs); see cleanrl_utils/run_store.py
INSTALL = "pip install -e . in a cleanrl clone"


class CheckpointError(Exception):
    """A checkpoint that cannot be read or cannot continue this command line; its text is one line for the user."""


class _Array:
    """A NumPy (or, with `jax=True`, a JAX) array inside a checkpoint: written as a torch tensor sharing its memory."""

    def __init__(self, tensor, jax=False):
        self.tensor, self.jax = tensor, jax


def encode(value):
    """`value` with every NumPy and JAX array inside dicts, lists and tuples wrapped for `torch.save` (no copy of
    NumPy arrays; JAX arrays are copied to the host once). Arrays of dtypes torch lacks stay NumPy arrays."""
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return type(value)(encode(v) for v in value)
    jax = sys.modules.get("jax")
    is_jax = jax is not None and isinstance(value, jax.Array)
    if is_jax and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        raise TypeError("typed JAX keys are not supported in checkpoints; keep jax.random.PRNGKey keys")
    if is_jax or (isinstance(value, np.ndarray) and value.dtype.kind in "biufc"):
        array = np.array(value) if is_jax else value  # a JAX array's host copy is read-only: a copy of our own
        try:
            return _Array(torch.from_numpy(np.ascontiguousarray(array) if array.strides else array.copy()), jax=is_jax)
        except TypeError:  # a dtype torch has no tensor for (bfloat16 in NumPy, ...): pickled as it is
            return _Array(array, jax=is_jax)
    return value


def decode(value):
    """The inverse of `encode`: NumPy arrays back (sharing the loaded tensors' memory), JAX arrays on the device."""
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return type(value)(decode(v) for v in value)
    if isinstance(value, _Array):
        array = value.tensor.numpy() if isinstance(value.tensor, torch.Tensor) else value.tensor
        return importlib.import_module("jax.numpy").asarray(array) if value.jax else array
    return value


def checkpoint_path(resume):
    """The checkpoint file `--resume` names: `resume` itself, or `{resume}/checkpoint.pt` for a run folder."""
    return os.path.join(resume, FILE) if os.path.isdir(resume) else resume


def read(path, script):
    """The checkpoint at `path` as written by `write`, checked to be one of `script`'s (a file name, e.g. "ppo.py").

    Raises CheckpointError, with a one-line reason, for a path that does not exist or cannot be read, a run folder
    without a checkpoint, a file that is not a checkpoint (a saved model included), a damaged or half-written
    file, and a checkpoint that another script wrote (the reason names it).
    """
    folder = path[: -len(FILE) - 1] if path.endswith(os.sep + FILE) else None
    if folder is not None and not os.path.exists(path):
        raise CheckpointError(
            f"cannot resume from {folder}: it holds no {FILE} (was the run started with --checkpoint-every, "
            "and did it reach its first checkpoint?)"
        )
    if not os.path.exists(path):
        raise CheckpointError(f"cannot resume from {path}: no such run folder or checkpoint file")
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise CheckpointError(f"cannot resume from {path}: {e.strerror or e}") from None
    if head[:2] != b"PK":  # torch.save writes a zip archive
        raise CheckpointError(f"cannot resume from {path}: not a checkpoint of a cleanrl script")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(f"cannot resume from {path}: the file is damaged or was not written to the end")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)  # our own file: arrays and random states
    except Exception as e:
        reason = (str(e).splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"cannot resume from {path}: the file is damaged ({reason})") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        if isinstance(saved, dict) and "model" in saved and "args" in saved:
            raise CheckpointError(
                f"cannot resume from {path}: it is a model saved by --save-model, not a checkpoint; "
                f"resume from its run folder's {FILE}"
            )
        raise CheckpointError(f"cannot resume from {path}: not a checkpoint of a cleanrl script")
    if saved.get("version") != VERSION:
        raise CheckpointError(
            f"cannot resume from {path}: written in checkpoint format {saved.get('version')}, this is {VERSION}"
        )
    if saved["script"] != script:
        raise CheckpointError(f"{path} was written by {saved['script']}, not {script}: resume it with {saved['script']}")
    return saved


def write(path, payload):
    """Writes `payload` (a dict) to `path` with `torch.save`, atomically: into `{path}.tmp`, flushed to the disk,
    then renamed over `path`, so that `path` is always a whole checkpoint (the last one when a write fails).
    Raises OSError (a full disk, a read-only folder) with `path` untouched and no `.tmp` left behind."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _spaces(envs):
    return {name: getattr(envs, name) for name in ("action_space", "single_action_space") if hasattr(envs, name)}


def random_state(envs=None):
    """Every random generator's state: Python's, NumPy's global one, torch's CPU one and (where CUDA is in use)
    the CUDA ones, and the `np_random` of `envs`' action spaces (gymnasium spaces, as the scripts sample them)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    spaces = _spaces(envs) if envs is not None else {}
    state["spaces"] = {
        name: space.np_random.bit_generator.state for name, space in spaces.items() if hasattr(space, "np_random")
    }
    return state


def set_random_state(state, envs=None):
    """Puts back what `random_state` returned. CUDA states are set on as many devices as both runs have."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, device)
    spaces = _spaces(envs) if envs is not None else {}
    for name, bit_state in state.get("spaces", {}).items():
        if name in spaces and hasattr(spaces[name], "np_random"):
            spaces[name].np_random.bit_generator.state = bit_state


def _is_flax_struct(value):
    struct = sys.modules.get("flax.struct")
    return struct is not None and isinstance(value, struct.PyTreeNode)


def capture(value):
    """(kind, payload) of one entry of a script's training state; `restore` reverses it (see the module's text)."""
    jax = sys.modules.get("jax")
    if hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
        return "state_dict", value.state_dict()
    if isinstance(value, torch.Tensor):
        return "tensor", value.detach().cpu()
    if _is_flax_struct(value):
        return "flax", importlib.import_module("flax.serialization").to_state_dict(value)
    if isinstance(value, np.ndarray | np.generic) or (jax is not None and isinstance(value, jax.Array)):
        return "value", value
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return "attributes", _attributes(value)
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        items = [capture(item) for item in value]
        if any(kind != "value" for kind, _ in items):  # live objects (e.g. a statistic per sub-env): each in place
            return "items", items
    return "value", value


def _attributes(value):
    """vars(value), with the attributes of its own objects of a class from the same module (a replay memory's sum tree)
    spelled out as "name.attribute": a checkpoint holds no object of a script's class, which only that script can read."""
    found = {}
    for name, item in vars(value).items():
        if hasattr(item, "__dict__") and not isinstance(item, type) and type(item).__module__ == type(value).__module__:
            found.update({f"{name}.{attribute}": v for attribute, v in _attributes(item).items()})
        else:
            found[name] = item
    return found


def restore(name, value, kind, payload):
    """`value` (the script's live entry `name`) with the saved payload put back: in place where `value` allows it
    (modules, optimizers, tensors, objects), else a new value. Raises CheckpointError where the saved entry does
    not fit (another network shape, another replay-memory size)."""
    try:
        if kind == "state_dict":
            value.load_state_dict(payload)
        elif kind == "tensor":
            with torch.no_grad():
                value.copy_(payload)
        elif kind == "flax":
            return importlib.import_module("flax.serialization").from_state_dict(value, payload)
        elif kind == "attributes":
            owners = {}  # "name.attribute" is the attribute of value's object `name` (see _attributes)
            for attribute, saved in payload.items():
                *path, leaf = attribute.split(".")
                owners[attribute] = owner = functools.reduce(getattr, path, value)
                current = getattr(owner, leaf, None)
                if hasattr(current, "shape") and hasattr(saved, "shape") and current.shape != saved.shape:
                    raise ValueError(
                        f"{attribute} has shape {tuple(saved.shape)} in the checkpoint, {tuple(current.shape)} now"
                    )
            for attribute, saved in payload.items():
                owner, leaf = owners[attribute], attribute.split(".")[-1]
                current = vars(owner).get(leaf)
                if isinstance(current, torch.Tensor) and isinstance(saved, torch.Tensor):
                    with torch.no_grad():  # in place: a CUDA run's tensors (RND's running statistics) stay on its GPU
                        current.copy_(saved)
                elif not isinstance(saved, torch.device):  # a replay memory samples onto this run's device, not the saved one
                    vars(owner)[leaf] = saved
        elif kind == "items":
            if len(payload) != len(value):
                raise ValueError(f"{len(payload)} items in the checkpoint, {len(value)} now")
            return type(value)(restore(f"{name}[{i}]", v, *saved) for i, (v, saved) in enumerate(zip(value, payload)))
        else:
            return payload
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(
            f"the saved {name} does not fit the flags given now ({reason}); resume with the flags the run was started with"
        ) from None
    return value


def _distributed():
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _rank():
    return torch.distributed.get_rank() if _distributed() else 0


def _world_size():
    return torch.distributed.get_world_size() if _distributed() else 1


def _refuse(script, reason):
    print(f"{script}: {reason}", file=sys.stderr)
    sys.exit(2)


class Checkpoint:
    """The checkpoints, resume and stops of one run of one script.

    `Checkpoint(script, args, fixed=("env_id",))` is made right after the command line is parsed. With
    `args.resume` it reads the checkpoint and puts the saved run's flags in `args` (in place), with the flags given
    now on top; it stops the script with exit code 2 and one line when the file cannot be read (see `read`), when a
    flag in `fixed` (those the saved networks fit) differs from the saved one, when the run folder is not
    `runs/{run_name}` under the working folder (a copy elsewhere would be written back over the original), and when
    nothing is left to train. Nothing is created before these checks.

    `start(state, writer, envs)` is called once, right before the training loop: `state` is a function that returns
    the training state as a dict (see the module's text), read at each checkpoint; it must hold "global_step".
    `step(count, last)` is called once per turn of the loop, with `count` in the cadence's unit
    (`args.checkpoint_every` counts the same thing) and `last` True on the final turn.

    Public attributes: `run_name` (the resumed run's, else None) and `saved`, the checkpoint being resumed as `read`
    returned it (None on a fresh run), for what a script must know before `start`, e.g. the step that seeds envs
    made at once (envpool).
    """

    def __init__(self, script, args, fixed=("env_id",)):
        self.script, self.args = os.path.basename(script), args
        self.saved = self.run_name = None
        self.stop = None  # the signal that ends the run at the next step()
        self.training = False
        self.count = 0
        self.learning_starts = getattr(args, "learning_starts", None)  # before a resume without the memory moves it
        if not args.resume and os.environ.get(STORE):  # a cloud job's later attempt goes on from the stored run
            found = importlib.import_module("cleanrl_utils.run_store").pull(self.script)
            if found:
                args.resume = found
        if args.resume:
            try:
                self._resolve(fixed)
            except CheckpointError as e:
                _refuse(self.script, e)
        # read once the saved flags are in: a resumed run keeps its own cadence unless the command line gives one
        self.every = max(int(getattr(args, "checkpoint_every", 0) or 0), 0)

    def _resolve(self, fixed):
        import tyro

        args, cls = self.args, type(self.args)
        path = checkpoint_path(args.resume)
        saved = read(path, self.script)
        fields = {f.name for f in dataclasses.fields(cls)}
        defaults = cls(**{k: v for k, v in saved["args"].items() if k in fields})
        given = tyro.cli(cls, default=defaults)  # the saved flags, with those on the command line on top
        given.resume = args.resume
        for flag in fixed:
            if getattr(given, flag) != saved["args"].get(flag):
                raise CheckpointError(
                    f"--{flag.replace('_', '-')} cannot change on --resume (the run has {saved['args'].get(flag)!r}): "
                    "the saved networks fit it"
                )
        home = os.path.join("runs", saved["run_name"])
        if os.path.realpath(os.path.dirname(os.path.abspath(path))) != os.path.realpath(home):
            raise CheckpointError(
                f"resume {home} from the folder that holds it, where the run goes on "
                f"({os.path.dirname(path) or '.'} is not {home} under {os.getcwd()})"
            )
        ranks, world = len(saved["rng"]["ranks"]) if "ranks" in saved["rng"] else 1, int(os.environ.get("WORLD_SIZE", "1"))
        if ranks != world:  # each process (torchrun's rank) goes on with its own random generators
            launch = "plain python (one process)" if ranks == 1 else f"torchrun --nproc-per-node {ranks}"
            raise CheckpointError(
                f"the checkpoint holds the random generators of {ranks} process(es), this run has {world}: "
                f"resume it with {launch}"
            )
        step, total = saved["global_step"], given.total_timesteps
        if step >= total or (saved["finished"] and total <= saved["args"]["total_timesteps"]):
            raise CheckpointError(f"nothing left: {home} is at global_step {step} of {total}; give more --total-timesteps")
        moved = saved["args"].get("learning_starts")  # a resume without the replay memory moved it on
        if getattr(given, "learning_starts", None) == moved:
            self.learning_starts = saved.get("learning_starts", moved)
        vars(args).update(vars(given))
        self.saved, self.run_name = saved, saved["run_name"]
        self.existing = set(os.listdir(home))
        for folder in (f"videos/{self.run_name}", f"videos/{self.run_name}-eval"):  # the resumed run's numbering starts at 0
            earlier = sorted(name for name in os.listdir(folder) if name.endswith(".mp4")) if os.path.isdir(folder) else []
            if earlier:
                aside = os.path.join(folder, f"until-global_step-{saved['global_step']}")
                os.makedirs(aside, exist_ok=True)
                for name in earlier:
                    os.replace(os.path.join(folder, name), os.path.join(aside, name))
        if saved["wandb_id"]:  # a tracked run goes on in the same W&B run
            os.environ.setdefault("WANDB_RUN_ID", saved["wandb_id"])
            os.environ.setdefault("WANDB_RESUME", "allow")

    def start(self, writer, envs, scope, names, purge=True):
        """Registers the training state and what a stop closes; on a resume, loads the checkpoint into it.

        `scope` is the script's namespace (`globals()`: the scripts run in global scope) and `names` the names in
        it that make up the training state, separated by spaces; "global_step" must be one of them. On a resume,
        networks, optimizers, tensors and objects are loaded in place and the rest (counters, flax structs, JAX
        keys) is rebound in `scope`; every random generator is set, and what a killed run logged after its
        checkpoint is hidden (TensorBoard's purge at global_step + 1). From here Ctrl-C and SIGTERM stop the run
        after the step under way.

        `purge=False` writes no such restart, for a script that logs its phases on step axes of their own (QDagger's
        teacher, offline and online steps): a restart at global_step + 1 would hide every point of an earlier phase
        past that step. A run killed after its checkpoint then shows the points it logged since twice.
        """
        self.purge = purge
        self.writer, self.envs, self.scope, self.names = writer, envs, scope, names.split()
        self.run_dir = writer.log_dir if writer is not None else os.path.join("runs", self.run_name or "")
        current = self.state()
        self.saved_step = current["global_step"]
        if self.saved is not None:
            try:
                scope.update(self._load(current))
            except CheckpointError as e:
                self._undo()
                _refuse(self.script, e)
            if _rank() == 0:
                print(
                    f"{self.script}: resuming {self.run_dir} from its checkpoint at global_step {self.saved_step}", flush=True
                )
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        self.training = True

    def state(self):
        """The training state now: {name: value} for the names given to `start`."""
        missing = [name for name in self.names if name not in self.scope]
        if missing or "global_step" not in self.names:
            raise NameError(f"the training state names {missing or ['global_step']}, which the script does not define")
        return {name: self.scope[name] for name in self.names}

    def _load(self, current):
        saved = self.saved
        entries = dict(saved["state"])
        if MEMORY in current and MEMORY not in entries:
            wait = self.learning_starts or 0  # the run's own, not one an earlier resume moved on
            if hasattr(self.args, "learning_starts"):
                self.args.learning_starts = saved["global_step"] + wait
            print(
                f"{self.script}: the checkpoint holds no replay memory (written with --no-checkpoint-memory): it starts "
                f"empty, and learning waits for {wait} new steps, until global_step {saved['global_step'] + wait}"
            )
        missing = sorted(set(current) - set(entries) - {MEMORY})
        if missing:
            raise CheckpointError(
                f"the checkpoint has no {', '.join(missing)}; it was written by another version of {self.script}"
            )
        restored = {}
        for name, value in current.items():
            if name in entries:
                kind, payload = entries[name]
                restored[name] = restore(name, value, kind, decode(payload))
            else:
                restored[name] = value
        saved["state"] = None  # put back: not held a second time for the rest of the run (PPG's auxiliary rows: GBs)
        rng = decode(saved["rng"])
        set_random_state(rng["ranks"][_rank()] if "ranks" in rng else rng, self.envs)
        self.count, self.saved_step = saved["count"], saved["global_step"]
        if self.writer is not None and self.purge:  # what SummaryWriter(purge_step=...) writes: a restart at this step
            from tensorboard.compat.proto.event_pb2 import Event, SessionLog

            restart = SessionLog(status=SessionLog.START)
            self.writer.file_writer.add_event(Event(step=saved["global_step"] + 1, session_log=restart))
        return restored

    def _undo(self):  # a refused resume leaves the run folder as it found it
        if self.writer is not None:
            self.writer.close()
        home = os.path.join("runs", self.run_name)
        for name in set(os.listdir(home)) - self.existing if _rank() == 0 else ():  # rank 0 wrote them
            path = os.path.join(home, name)
            if os.path.isfile(path):
                os.remove(path)

    def snapshot(self, finished=False):
        """The checkpoint as it would be written now (a dict; see the module's text)."""
        state = self.state()
        if not getattr(self.args, "checkpoint_memory", True):
            state.pop(MEMORY, None)
        wandb = sys.modules.get("wandb")
        return {
            "format": FORMAT,
            "version": VERSION,
            "script": self.script,
            "args": dataclasses.asdict(self.args),
            "run_name": os.path.basename(os.path.normpath(self.run_dir)),
            "wandb_id": wandb.run.id if wandb is not None and getattr(wandb, "run", None) is not None else None,
            "global_step": int(state["global_step"]),
            "count": int(self.count),
            "finished": bool(finished),
            "learning_starts": self.learning_starts,
            "rng": encode(self._random_states()),
            "state": {name: tuple(encode(part) for part in capture(value)) for name, value in state.items()},
        }

    def _random_states(self):  # in a multi-process run (torchrun), each process's generators, in rank order
        if not _distributed():
            return random_state(self.envs)
        states = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(states, random_state(self.envs))
        return {"ranks": states}

    def save(self, finished=False):
        """Writes the checkpoint now (the log flushed first, so that it reaches the checkpoint's step). A failed
        write (a full disk) keeps the last checkpoint and says so in one line; the run goes on. Returns whether
        it was written."""
        if self.writer is not None:
            self.writer.flush()
        payload = self.snapshot(finished)
        path = os.path.join(self.run_dir, FILE)
        if _rank() != 0:  # one process writes the run's checkpoint
            self.saved_step = payload["global_step"]
            return True
        try:
            write(path, payload)
        except OSError as e:
            print(f"{self.script}: warning: could not write {path} ({e.strerror or e}); the last one stays", file=sys.stderr)
            return False
        self.saved_step = payload["global_step"]
        if os.environ.get(STORE):
            importlib.import_module("cleanrl_utils.run_store").push(self.run_dir)
        return True

    def step(self, count, last=False):
        """One turn of the training loop is done: writes a checkpoint when `count` crossed a multiple of
        `args.checkpoint_every` since the last call, when `last`, or after a signal; after a signal the run then
        ends here (see `end`)."""
        if self.every:
            due = count // self.every > self.count // self.every
        else:
            due = False
        self.count = count
        if _distributed():  # every process stops at the same turn, or the next collective waits forever
            stops = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(stops, self.stop)
            self.stop = max((s for s in stops if s is not None), default=None)
        if due or last or self.stop is not None:
            written = self.save(finished=last)
            if self.stop is not None:
                self.end(written)
        if last:
            self.training = False

    def end(self, written):
        """Closes the log, the envs and the W&B run, prints what was kept and how to go on, and exits 128 + signal."""
        if self.writer is not None:
            self.writer.close()
        if self.envs is not None:
            self.envs.close()  # RecordVideo writes the video of an episode still running
        wandb = sys.modules.get("wandb")
        if wandb is not None and getattr(wandb, "run", None) is not None:
            wandb.finish()
        step, name = self.state()["global_step"], signal.Signals(self.stop).name
        if _rank() != 0:  # every process stops here; rank 0 says what was kept
            sys.exit(128 + self.stop)
        launch = [sys.executable, sys.argv[0]]
        if _distributed():  # torchrun's ranks, as many again on this machine
            local = os.environ.get("LOCAL_WORLD_SIZE", str(_world_size()))
            launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={local}", sys.argv[0]]
        if written:
            command = shlex.join([*launch, "--resume", self.run_dir])
            kept = f"saved in {os.path.join(self.run_dir, FILE)}; go on with: {command}"
        else:
            kept = f"not saved (the checkpoint at global_step {self.saved_step} stays)"
        print(f"{self.script}: stopped by {name} at global_step {step}; {kept}", file=sys.stderr, flush=True)
        sys.exit(128 + self.stop)

    def _on_signal(self, signum, frame):
        name = signal.Signals(signum).name
        if self.training and self.stop is None:
            self.stop = signum
            if _rank() != 0:  # under torchrun every rank gets the signal: one line, from rank 0
                return
            again = "Ctrl-C" if signum == signal.SIGINT else name
            step = self.state()["global_step"]
            since = f"since the checkpoint at global_step {self.saved_step}" if self.saved_step else "of this run"
            print(
                f"{self.script}: {name}: stopping after the step under way, with a checkpoint; a second {again} stops "
                f"at once and loses the {step - self.saved_step} steps {since}",
                file=sys.stderr,
                flush=True,
            )
            return
        if _rank() == 0:
            print(f"{self.script}: stopped at once by {name}; files written before stay", file=sys.stderr, flush=True)
        sys.exit(128 + signum)
