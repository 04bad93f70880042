"""Tunes a training script's hyperparameters with Optuna, scoring each trial over several envs and seeds.

    python -m cleanrl_utils.tuner --command "python cleanrl/ppo.py --no-cuda --total-timesteps 50000" \\
        --target-scores CartPole-v1=0,500 Acrobot-v1=-500,0 \\
        --params learning-rate=loguniform:0.0003,0.003 num-minibatches=categorical:1,2,4 update-epochs=int:1,8 \\
        --num-trials 10 --num-seeds 2 --storage sqlite:///tuner.db --study-name ppo-classic

Optuna (Akiba et al. 2019, "Optuna: A Next-generation Hyperparameter Optimization Framework", KDD) draws
the parameters (TPE by default), prunes trials and keeps the study. The Python API is `Tuner`, with the
arguments of CleanRL's tuner (`script="cleanrl/ppo.py"` means `command="cleanrl/ppo.py"`; `wandb_kwargs` gives
each trial a W&B run with its parameters and scores); the command line builds one from `--params` specs.
Each run computes on one thread (`OMP_NUM_THREADS=1` and XLA's single-thread flags, as the benchmark runner
sets them; `one_thread=False` or `--no-one-thread` leaves the libraries' defaults), unless you set
OMP_NUM_THREADS yourself.

A trial: the sampler draws the parameters; then seed by seed (start_seed, start_seed + 1, ...), env by env
(in the order of the target scores), one run of the command. The command is split with shell-word rules
(`shlex.split`) and started without a shell, in the current folder, as `cleanrl_utils.benchmark` does, with
the trial's flags, `--env-id ENV --seed SEED` and `--exp-name {study}-trial{N}` appended (a first word that
ends in `.py` is run with the Python running the tuner). The script must take those flags and write its
TensorBoard run to `runs/{env}__{exp_name}__{seed}__{time}` (every cleanrl script does: script contract),
so each trial's runs stay apart, and `cleanrl_utils.report` shows one row per trial and env; the run's
stdout and stderr go to `{log_dir}/{study}-trial{N}/{env}__{seed}.log`.

Scores, all plain floats:
  - a run's score: the mean of the last `metric_last_n_average_window` points of the scalar `metric`
    (all of them if fewer were logged), e.g. the mean return of the last 50 episodes;
  - its normalised score: (score - min) / (max - min) with the env's target range (min, max), so min maps to
    0 and max to 1 (CartPole-v1 (0, 500), Acrobot-v1 (-500, 0)); an env without a range keeps its raw score;
  - a seed's score: the `aggregation_type` (average, median, min or max) of its envs' normalised scores;
  - the trial's value: the mean of its seeds' scores. After each seed the mean of the seeds' scores so far is
    reported to Optuna (`trial.report(value, step=i)`, i = 0 for the first seed), and after each seed but the
    last the pruner may stop the trial (state PRUNED), so a pruner such as Optuna's MedianPruner compares
    trials after the same number of seeds.

A run that exits non-zero, writes no run folder, or logs no finite value of the metric fails its trial
(state FAIL; its other runs are skipped) and the study goes on; the trial's user attr `failed_run` says
which run, why, and where its log is. After `max_consecutive_failures` (5) failed trials in a row the tuner
stops (exit 1): that points to a broken command rather than to bad parameters. Each trial also keeps, as user
attrs, `flags` (what was appended to the command), `exp_name`, `log_dir`, `scores` ({env: [raw score of each
seed run so far]}) and `seed_scores`.

The study lives in `storage` (an SQLAlchemy URL, SQLite by default) under `study_name`: running again with
the same two adds trials to it rather than starting over, and tuners started at once with the same two
work as parallel workers. With `--sampler-seed` (`seeded_per_trial` from Python) trial N draws with a
sampler seeded by the seed and N: a resumed study goes on with new draws that a rerun repeats. The settings
that make trial values comparable (command, metric and window, target scores, aggregation, seeds,
direction) are stored with the study, and so is the search space of `--params` specs ({name: spec, e.g.
"loguniform:0.0003,0.003"}); resuming with others is refused, naming what changed, before any trial.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Optional, TextIO

import numpy as np

from cleanrl_utils.benchmark import Run, one_thread_env, run_one
from cleanrl_utils.report import read_scalars

if TYPE_CHECKING:
    import optuna

AGGREGATIONS: dict[str, Callable[[list[float]], float]] = {
    "average": lambda xs: float(np.mean(xs)),
    "median": lambda xs: float(np.median(xs)),
    "min": lambda xs: float(np.min(xs)),
    "max": lambda xs: float(np.max(xs)),
}
RESERVED_FLAGS = ("env-id", "seed", "exp-name")  # the tuner sets these for every run
KINDS = ("float", "loguniform", "int", "categorical")
FLAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class ParamSpec:
    """One hyperparameter to tune, from a `NAME=KIND:VALUES` spec: the script flag `name` (without `--`) and
    its distribution: `float` (uniform in [low, high]), `loguniform` (log-uniform in [low, high], low > 0),
    `int` (integers low, low + step, ..., high) or `categorical` (one of `choices`)."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    step: int = 1
    choices: tuple = ()

    def distribution(self) -> optuna.distributions.BaseDistribution:
        """The Optuna distribution `suggest` draws from."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.kind in ("float", "loguniform"):
            return FloatDistribution(self.low, self.high, log=self.kind == "loguniform")
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), step=self.step)
        return CategoricalDistribution(list(self.choices))

    def suggest(self, trial: optuna.Trial):
        """The value the trial's sampler draws for this parameter."""
        if self.kind == "float":
            return trial.suggest_float(self.name, self.low, self.high)
        if self.kind == "loguniform":
            return trial.suggest_float(self.name, self.low, self.high, log=True)
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=self.step)
        return trial.suggest_categorical(self.name, list(self.choices))


def describe(distribution: optuna.distributions.BaseDistribution) -> str:
    """An Optuna distribution in the words of a `--params` spec, e.g. `loguniform:0.0003,0.003`,
    `float:0,0.02`, `int:1,9,2`, `categorical:1,2.5,true,adam` (what Optuna has and specs lack is added:
    `float:0,1 step 0.1`, `int:1,64 log`). The same distribution always reads the same."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    def number(x: float) -> str:
        text = repr(float(x))
        return text[:-2] if text.endswith(".0") else text

    def choice(value) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return repr(value) if isinstance(value, float) else str(value)

    if isinstance(distribution, FloatDistribution):
        text = f"{'loguniform' if distribution.log else 'float'}:{number(distribution.low)},{number(distribution.high)}"
        return text if distribution.step is None else f"{text} step {number(distribution.step)}"
    if isinstance(distribution, IntDistribution):
        text = f"int:{distribution.low},{distribution.high}" + (f",{distribution.step}" if distribution.step != 1 else "")
        return f"{text} log" if distribution.log else text
    if isinstance(distribution, CategoricalDistribution):
        return "categorical:" + ",".join(choice(c) for c in distribution.choices)
    return repr(distribution)


def search_space_change(old: dict[str, str], new: dict[str, str], whole: bool = True) -> Optional[str]:
    """How the search space `new` ({name: `describe` text}) differs from `old`, or None: a parameter drawn
    from another distribution, and (`whole`: `old` is a full search space) one added or left out."""
    for name, spec in new.items():
        if name in old and old[name] != spec:
            return f"{name} was {old[name]}, not {spec}"
        if whole and name not in old:
            return f"it had no {name} ({spec})"
    for name, spec in old.items():
        if whole and name not in new:
            return f"{name} ({spec}) is left out now"
    return None


def parse_choice(word: str):
    """A categorical value as the type it reads as: bool (true/false, any case), int, float, else str."""
    if word.lower() in ("true", "false"):
        return word.lower() == "true"
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            pass
    return word


def parse_param(spec: str) -> ParamSpec:
    """A `--params` spec, `NAME=KIND:VALUES`, as a ParamSpec:
    `learning-rate=loguniform:0.0003,0.003`, `ent-coef=float:0,0.02`, `update-epochs=int:1,8` (or
    `int:LOW,HIGH,STEP`), `num-minibatches=categorical:1,2,4` (values read as bool, int, float or str).
    Raises ValueError naming the spec and the problem."""
    name, sep, rest = spec.partition("=")
    kind, sep2, values = rest.partition(":")
    if not sep or not sep2:
        return _bad(spec, "must be NAME=KIND:VALUES, e.g. learning-rate=loguniform:0.0003,0.003")
    if not FLAG_NAME.fullmatch(name):
        return _bad(spec, f"{name!r} is not a flag name such as learning-rate (no leading --)")
    if name.replace("_", "-") in RESERVED_FLAGS:
        return _bad(spec, f"the tuner sets --{name} itself")
    if kind not in KINDS:
        return _bad(spec, f"unknown distribution {kind!r}; use {', '.join(KINDS)}")
    words = values.split(",")
    if kind == "categorical":
        if len(words) < 2 or any(not w for w in words):
            return _bad(spec, "categorical takes two or more comma-separated values")
        choices = [parse_choice(w) for w in words]
        if any(a == b for i, a in enumerate(choices) for b in choices[:i]):  # 1, 1.0 and true are equal too
            return _bad(spec, "categorical values must differ")
        return ParamSpec(name, kind, choices=tuple(choices))
    if kind == "int":
        try:
            numbers = [int(w) for w in words]
        except ValueError:
            return _bad(spec, "int takes integers LOW,HIGH or LOW,HIGH,STEP")
        if len(numbers) not in (2, 3):
            return _bad(spec, "int takes LOW,HIGH or LOW,HIGH,STEP")
        low, high, step = (*numbers, 1) if len(numbers) == 2 else numbers
        if low >= high:
            return _bad(spec, f"LOW {low} must be below HIGH {high}")
        if step < 1 or (high - low) % step:
            return _bad(spec, f"STEP {step} must be at least 1 and divide HIGH - LOW ({high - low})")
        return ParamSpec(name, kind, float(low), float(high), step)
    try:
        numbers = [float(w) for w in words]
    except ValueError:
        return _bad(spec, f"{kind} takes numbers LOW,HIGH")
    if len(numbers) != 2 or not all(math.isfinite(x) for x in numbers):
        return _bad(spec, f"{kind} takes two finite numbers LOW,HIGH")
    low, high = numbers
    if low >= high:
        return _bad(spec, f"LOW {low:g} must be below HIGH {high:g}")
    if kind == "loguniform" and low <= 0:
        return _bad(spec, f"loguniform needs LOW > 0, got {low:g}")
    return ParamSpec(name, kind, low, high)


def _bad(spec: str, problem: str):
    raise ValueError(f"--params {spec!r}: {problem}")


def parse_target_scores(specs: list[str]) -> dict[str, Optional[tuple[float, float]]]:
    """`--target-scores` specs, `ENV=MIN,MAX` (normalise that env's score to (score - MIN) / (MAX - MIN)) or
    `ENV` alone (keep its raw score), as {env: (MIN, MAX) or None} in the order given. Raises ValueError."""
    targets: dict[str, Optional[tuple[float, float]]] = {}
    for spec in specs:
        env_id, sep, values = spec.partition("=")
        if not env_id or any(c.isspace() for c in env_id):
            raise ValueError(f"--target-scores {spec!r}: must be ENV=MIN,MAX or ENV, e.g. CartPole-v1=0,500")
        if env_id in targets:
            raise ValueError(f"--target-scores names {env_id} twice")
        if not sep:
            targets[env_id] = None
            continue
        try:
            low, high = (float(w) for w in values.split(","))
        except ValueError:
            raise ValueError(f"--target-scores {spec!r}: MIN,MAX must be two numbers, e.g. CartPole-v1=0,500") from None
        targets[env_id] = (low, high)
    return targets


def target_error(env_id: str, target) -> Optional[str]:
    """What is wrong with one env's target range (None, or (min, max) with finite min < max), or None."""
    if target is None:
        return None
    try:
        low, high = (float(x) for x in target)
    except (TypeError, ValueError):
        return f"the target scores of {env_id} must be (min, max) or None, got {target!r}"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"the target scores of {env_id} must be finite, got {low:g},{high:g}"
    if low >= high:
        return f"the target scores of {env_id}: min {low:g} must be below max {high:g}"
    return None


def normalise(score: float, target: Optional[tuple[float, float]]) -> float:
    """(score - min) / (max - min) for target (min, max); the score itself for None."""
    if target is None:
        return score
    low, high = target
    return (score - low) / (high - low)


def param_flags(params: dict[str, Any]) -> list[str]:
    """The command-line words of a trial's parameters, in order: `--name` / `--no-name` for a bool (tyro's
    boolean flags), `--name=value` otherwise (one word, so negative numbers stay values)."""
    words = []
    for name, value in params.items():
        if isinstance(value, bool):
            words.append(f"--{name}" if value else f"--no-{name}")
        else:
            words.append(f"--{name}={value}")
    return words


def flag_names(words: list[str]) -> set[str]:
    """The flags set in a list of command-line words, dashed and without `--` (`--no-x` counts as `x` too)."""
    names = set()
    for word in words:
        if word.startswith("--") and len(word) > 2:
            name = word[2:].split("=", 1)[0].replace("_", "-")
            names.add(name)
            if name.startswith("no-"):
                names.add(name[3:])
    return names


def trial_exp_name(study_name: str, number: int) -> str:
    """The `--exp-name` of trial `number`'s runs: `{study}-trial{number}`, with the study name cut to 64
    characters and anything but letters, digits, `.`, `-` and single `_` replaced by `-` (run names split on
    `__` and `/`)."""
    base = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9._-]+", "-", study_name))[:64].strip("-_.") or "tuner"
    return f"{base}-trial{number}"


def plural(count: int, noun: str) -> str:
    """`1 trial`, `2 trials`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def storage_error(storage) -> Optional[str]:
    """What is wrong with a storage URL before anything connects to it (which would create an SQLite file),
    or None: not a URL, a database SQLAlchemy does not know, a driver that is not installed, an SQLite URL
    that is not a file (`sqlite://x.db`, in memory) or whose folder is missing. Non-string storages (an
    Optuna storage object, or None for in memory) pass."""
    if not isinstance(storage, str):
        return None
    if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", storage):
        return f"--storage {storage!r} must be a database URL such as sqlite:///tuner.db"
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    except ImportError:
        return None  # no Optuna either, which build_tuner names
    try:
        url = make_url(storage)
    except ArgumentError:
        return f"--storage {storage!r} is not a database URL such as sqlite:///tuner.db"
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        return f"--storage {storage!r}: SQLAlchemy knows no database {url.drivername!r}; e.g. sqlite:///tuner.db"
    try:
        dialect.import_dbapi()
    except ImportError as e:
        return f"--storage {storage!r}: the driver of {url.drivername} is not installed ({e})"
    if url.get_backend_name() == "sqlite":
        path = url.database or ""
        if url.host or url.port or url.username:
            return f"--storage {storage!r}: an SQLite file follows three slashes, sqlite:///tuner.db (sqlite:////abs/tuner.db)"
        if path in ("", ":memory:") or path.startswith("file::memory:"):
            return f"--storage {storage!r} keeps the study in memory, so it cannot resume; name a file: sqlite:///tuner.db"
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            return f"--storage {storage!r} names a folder; name a database file in it"
        if not os.path.isdir(folder):
            return f"--storage {storage!r}: the folder {folder} does not exist"
    return None


class RunFailed(Exception):
    """One run of a trial gave no score: it exited non-zero, wrote no run folder or logged no finite metric."""

    def __init__(self, env_id: str, seed: int, reason: str, log_path: str, exit_code: Optional[int] = None):
        super().__init__(f"{env_id} seed {seed}: {reason}; log {log_path}")
        self.info = {"env_id": env_id, "seed": seed, "reason": reason, "exit_code": exit_code, "log": log_path}


class Tuner:
    """Hyperparameter search over a training command with Optuna (see the module docstring for a trial's
    runs, its scores and the study's storage).

    Args:
        command: the training command, e.g. "python cleanrl/ppo.py --no-cuda --total-timesteps 50000", split
            with shell-word rules and run without a shell (a first word ending in `.py` runs with this
            Python). It must not set --env-id, --seed or --exp-name.
        script: CleanRL's name for the command: `script="cleanrl/ppo.py"` is `command="cleanrl/ppo.py"`; give
            one of the two.
        target_scores: {env_id: (min, max)} normalising each env's score to (score - min) / (max - min), or
            {env_id: None} to keep the raw score; the envs of every seed, in this order.
        params_fn: trial -> {flag name without `--`: value} for one run, e.g.
            `lambda t: {"learning-rate": t.suggest_float("learning-rate", 3e-4, 3e-3, log=True)}`; fixed
            values may be included; bools become `--name` / `--no-name`. `params_fn_from(specs)` (what the
            command line uses) has a search space known up front, stored with the study: resuming with
            another is refused before any trial. A plain function can only be checked as it draws: Optuna
            refuses a parameter drawn from another kind of distribution (or other categorical choices) than
            in the study's earlier trials, and the tuner then raises ValueError naming the parameter, with
            that trial marked failed and its `error` user attr saying why; a changed range of the same kind
            is not caught.
        metric: the TensorBoard scalar tag a run is scored by.
        direction: "maximize" or "minimize" the trial value.
        aggregation_type: how a seed's normalised env scores combine: "average", "median", "min" or "max".
        metric_last_n_average_window: a run's score is the mean of this many last points of `metric`.
        sampler, pruner: Optuna objects (default: Optuna's, TPESampler and MedianPruner). For repeatable draws
            that a resumed study continues rather than repeats, seed the sampler per trial:
            `seeded_per_trial(lambda seed: optuna.samplers.TPESampler(seed=seed), 1)`.
        storage: the study's database URL (default an SQLite file in the current folder), or None to keep it
            in memory (no resuming).
        study_name: the study's name in the storage; also names the runs (`--exp-name {study}-trial{N}`).
            "" (the default, as in CleanRL) names a new study `tuner_{unix time}`; the command line's default
            is "tuner", which a second run resumes.
        load_if_exists: resume a study of that name (False: refuse an existing one).
        log_dir: the folder of the runs' logs, one subfolder per trial.
        out: where the progress lines go (default: sys.stdout as it is when the Tuner is made).
        wandb_kwargs: CleanRL's W&B logging of trials: when not empty, each trial is a W&B run made with
            `wandb.init(**wandb_kwargs)` (named `{study}-trial{N}`, grouped by study, its config the trial's
            parameters) that logs `{env_id}_return` (the normalised score of each run) and
            `aggregated_normalized_score` (each seed's score); the runs' own W&B tracking is separate.
        one_thread: run each training with one compute thread (`benchmark.one_thread_env`) unless
            OMP_NUM_THREADS is set in the environment.

    Raises ValueError (one line) for any of these that cannot work; nothing is created until `tune`.
    """

    def __init__(
        self,
        command: Optional[str] = None,
        target_scores: Optional[dict[str, Optional[tuple[float, float]]]] = None,
        params_fn: Optional[Callable[[optuna.Trial], dict[str, Any]]] = None,
        metric: str = "charts/episodic_return",
        direction: Literal["maximize", "minimize"] = "maximize",
        aggregation_type: Literal["average", "median", "min", "max"] = "average",
        metric_last_n_average_window: int = 50,
        sampler: Optional[optuna.samplers.BaseSampler] = None,
        pruner: Optional[optuna.pruners.BasePruner] = None,
        storage: Optional[str] = "sqlite:///tuner.db",
        study_name: str = "",
        load_if_exists: bool = True,
        log_dir: str = "tuner_logs",
        out: Optional[TextIO] = None,
        *,
        script: Optional[str] = None,
        wandb_kwargs: Optional[dict[str, Any]] = None,
        one_thread: bool = True,
    ):
        if (command is None) == (script is None):
            raise ValueError("give the training command as command= or as script= (CleanRL's name), not both")
        command = command if script is None else script
        if study_name == "":
            study_name = f"tuner_{int(time.time())}"
        if wandb_kwargs:
            try:
                import wandb  # noqa: F401
            except ImportError:
                raise ValueError("wandb_kwargs needs wandb: pip install wandb") from None
        try:
            words = shlex.split(command)
        except ValueError as e:
            raise ValueError(f"--command {command!r} does not split into words ({e})") from None
        if not words:
            raise ValueError("--command is empty")
        if words[0].endswith(".py"):
            if not os.path.isfile(words[0]):
                raise ValueError(f"--command: no such script {words[0]!r}")
            words = [sys.executable, *words]
        elif shutil.which(words[0]) is None:
            raise ValueError(f"--command: cannot find the program {words[0]!r}")
        reserved = sorted(flag_names(words) & set(RESERVED_FLAGS))
        if reserved:
            raise ValueError(f"--command sets --{reserved[0]}; the tuner sets it for every run, leave it out")
        if not target_scores:
            raise ValueError("--target-scores must name at least one environment")
        for env_id, target in target_scores.items():
            error = target_error(env_id, target)
            if error is not None:
                raise ValueError(error)
        if not callable(params_fn):
            raise ValueError("params_fn must be a function of the trial")
        if not metric:
            raise ValueError("--metric is empty")
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"--direction must be maximize or minimize, got {direction!r}")
        if aggregation_type not in AGGREGATIONS:
            raise ValueError(f"--aggregation-type must be one of {', '.join(AGGREGATIONS)}, got {aggregation_type!r}")
        if metric_last_n_average_window < 1:
            raise ValueError(f"--metric-last-n-average-window must be at least 1, got {metric_last_n_average_window}")
        error = storage_error(storage)
        if error is not None:
            raise ValueError(error)
        if not study_name:
            raise ValueError("--study-name is empty")
        if os.path.exists(log_dir) and not os.path.isdir(log_dir):
            raise ValueError(f"--log-dir {log_dir!r} is a file")
        self.command = command
        self.words = words
        self.target_scores = {env_id: None if t is None else (float(t[0]), float(t[1])) for env_id, t in target_scores.items()}
        self.params_fn = params_fn
        self.metric = metric
        self.direction = direction
        self.aggregation_type = aggregation_type
        self.metric_last_n_average_window = metric_last_n_average_window
        self.sampler = sampler
        self.pruner = pruner
        self.storage = storage
        self.study_name = study_name
        self.load_if_exists = load_if_exists
        self.log_dir = log_dir
        self.out = sys.stdout if out is None else out
        self.wandb_kwargs = dict(wandb_kwargs or {})
        self.one_thread = one_thread

    def settings(self, num_seeds: int, start_seed: int) -> dict:
        """What makes trial values comparable, as stored with the study (plain JSON types)."""
        return {
            "command": shlex.split(self.command),
            "metric": self.metric,
            "metric_last_n_average_window": self.metric_last_n_average_window,
            "target_scores": {env_id: None if t is None else list(t) for env_id, t in self.target_scores.items()},
            "aggregation_type": self.aggregation_type,
            "num_seeds": num_seeds,
            "start_seed": start_seed,
        }

    def load_study(self, num_seeds: int, start_seed: int) -> optuna.Study:
        """Creates the study, or loads it (`load_if_exists`) after checking that it was tuned with the same
        settings and direction. Raises ValueError (one line) when it cannot be opened or resumed."""
        import optuna
        import sqlalchemy.exc

        try:
            study = optuna.create_study(
                storage=self.storage,
                study_name=self.study_name,
                direction=self.direction,
                sampler=self.sampler,
                pruner=self.pruner,
                load_if_exists=self.load_if_exists,
            )
        except optuna.exceptions.DuplicatedStudyError:
            raise ValueError(f"the study {self.study_name!r} already exists in {self.storage}") from None
        except (ImportError, sqlalchemy.exc.SQLAlchemyError) as e:  # e.g. a database server that cannot be reached
            lines = str(e).strip().splitlines() or [type(e).__name__]
            raise ValueError(f"cannot open --storage {self.storage!r}: {lines[0]}") from None
        where = f"the study {self.study_name!r} in {self.storage}"
        if study.direction.name.lower() != self.direction:
            raise ValueError(f"{where} is to {study.direction.name.lower()}, not {self.direction}; use another study name")
        settings = json.loads(json.dumps(self.settings(num_seeds, start_seed)))
        stored = study.user_attrs.get("tuner")
        for key, value in settings.items():
            if stored is not None and stored.get(key) != value:
                old, new = (
                    shlex.join(v) if key == "command" and isinstance(v, list) else repr(v) for v in (stored.get(key), value)
                )
                raise ValueError(
                    f"{where} was tuned with {key} {old}, not {new}; resume it with those, or use another study name"
                )
        old_space = None if stored is None else stored.get("search_space")
        space = self.params_fn.search_space() if isinstance(self.params_fn, SpecParams) else None
        if space is not None:
            if old_space is None:  # a new study, or one tuned with a plain params_fn: its trials' distributions
                seen = {name: describe(d) for t in study.get_trials(deepcopy=False) for name, d in t.distributions.items()}
                change = search_space_change(seen, space, whole=False)
            else:
                change = search_space_change(old_space, space)
            if change is not None:
                raise ValueError(
                    f"{where} was made with another search space: {change}; resume it with the same --params, "
                    "or use another --study-name"
                )
            settings["search_space"] = space
        elif old_space is not None:
            settings["search_space"] = old_space  # a plain params_fn cannot be checked up front; keep it
        if stored != settings:
            study.set_user_attr("tuner", settings)
        return study

    def tune(
        self, num_trials: int, num_seeds: int = 3, start_seed: int = 1, max_consecutive_failures: int = 5
    ) -> optuna.Study:
        """Runs `num_trials` more trials of the study, each over seeds start_seed ... start_seed + num_seeds - 1
        and every env, then prints the best trial of the whole study. Returns the study (e.g. for
        `.best_trial`, `.trials_dataframe()`).

        Raises ValueError (one line, before any run) for bad counts or a study that cannot be resumed, and
        RuntimeError after `max_consecutive_failures` failed trials in a row (0: never), which points to a
        broken command rather than bad parameters. Ctrl-C marks the running trial failed and stops its run."""
        import optuna
        from optuna.trial import TrialState

        if num_trials < 1:
            raise ValueError(f"--num-trials must be at least 1, got {num_trials}")
        if num_seeds < 1:
            raise ValueError(f"--num-seeds must be at least 1, got {num_seeds}")
        if not (0 <= start_seed and start_seed + num_seeds <= 2**32):
            raise ValueError(f"the seeds {start_seed} ... {start_seed + num_seeds - 1} must lie in [0, 2**32 - 1]")
        if max_consecutive_failures < 0:
            raise ValueError(f"--max-consecutive-failures must be at least 0 (0: never stop), got {max_consecutive_failures}")
        study = self.load_study(num_seeds, start_seed)
        seeds = range(start_seed, start_seed + num_seeds)
        finished = sum(t.state.is_finished() for t in study.trials)
        self.print(
            f"study {study.study_name!r} in {self.storage}: {plural(finished, 'finished trial')} so far; "
            f"{plural(num_trials, 'more trial')} to run, each {plural(num_seeds, 'seed')} x "
            f"{plural(len(self.target_scores), 'env')}; logs in {self.log_dir}/"
        )
        session, failures_in_a_row = [], 0
        for _ in range(num_trials):
            trial = study.ask()
            session.append(trial.number)
            try:
                value = self.run_trial(trial, seeds)
            except optuna.TrialPruned:
                study.tell(trial, state=TrialState.PRUNED)
            except RunFailed as e:
                trial.set_user_attr("failed_run", e.info)
                study.tell(trial, state=TrialState.FAIL)
                self.print(f"trial {trial.number}: FAILED, {e}")
                failures_in_a_row += 1
                if failures_in_a_row == max_consecutive_failures:
                    self.print_summary(study, [t for t in study.trials if t.number in session])
                    what = "a failed trial" if failures_in_a_row == 1 else f"{failures_in_a_row} failed trials in a row"
                    raise RuntimeError(f"stopped after {what}; the last: {e}") from None
                continue
            except BaseException as e:  # Ctrl-C or a broken params_fn: the trial must not stay RUNNING in the storage
                try:
                    trial.set_user_attr("error", str(e) or type(e).__name__)
                finally:
                    study.tell(trial, state=TrialState.FAIL)
                raise
            else:
                study.tell(trial, value)
                self.print(f"trial {trial.number}: value {value:.4f}")
            failures_in_a_row = 0
        self.print_summary(study, [t for t in study.trials if t.number in session])
        return study

    def run_trial(self, trial: optuna.Trial, seeds: range) -> float:
        """Every seed x env run of one trial; returns its value. Raises optuna.TrialPruned when the pruner
        stops it after a seed, RunFailed when a run gives no score, ValueError for parameters that name a
        flag the tuner or the command sets."""
        import optuna

        try:
            params = self.params_fn(trial)
        except ValueError as e:
            problem = self.distribution_problem(trial, e)
            if problem is None:
                raise
            raise ValueError(problem) from None
        if not isinstance(params, dict) or not all(isinstance(k, str) and FLAG_NAME.fullmatch(k) for k in params):
            raise ValueError(f"params_fn must return {{flag name: value}}, got {params!r}")
        clash = sorted({k.replace("_", "-") for k in params} & (set(RESERVED_FLAGS) | flag_names(self.words)))
        if clash:
            raise ValueError(f"the parameter {clash[0]!r} is also set by the tuner or in the command")
        flags = param_flags(params)
        exp_name = trial_exp_name(self.study_name, trial.number)
        log_dir = os.path.join(self.log_dir, exp_name)
        os.makedirs(log_dir, exist_ok=True)
        for key, value in (("flags", flags), ("exp_name", exp_name), ("log_dir", log_dir)):
            trial.set_user_attr(key, value)
        self.print(f"trial {trial.number}: {' '.join(flags) or '(no parameters)'}")
        if not self.wandb_kwargs:
            return self.run_seeds(trial, seeds, flags, exp_name, log_dir, lambda values: None)
        import wandb

        settings = {"name": exp_name, "group": self.study_name, "config": params, "reinit": "create_new"}
        try:
            wandb_run = wandb.init(**(settings | self.wandb_kwargs))
        except Exception as e:  # no login at a terminal-less start, a bad kwarg: one line, not wandb's traceback
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            fix = "`wandb login` or WANDB_MODE=offline"
            raise ValueError(f"wandb_kwargs: W&B cannot start the trial's run ({first}); {fix}") from None
        exit_code = 1
        try:
            value = self.run_seeds(trial, seeds, flags, exp_name, log_dir, wandb_run.log)
            exit_code = 0
            return value
        except optuna.TrialPruned:
            exit_code = 0
            raise
        finally:
            wandb_run.finish(exit_code=exit_code)

    def run_seeds(
        self, trial: optuna.Trial, seeds: range, flags: list[str], exp_name: str, log_dir: str, log: Callable[[dict], Any]
    ) -> float:
        """The runs of one trial, seed by seed, each seed's envs in order; returns the trial's value. `log`
        receives `{env_id}_return` (a run's normalised score) and `aggregated_normalized_score` (a seed's)."""
        import optuna

        scores: dict[str, list[float]] = {env_id: [] for env_id in self.target_scores}
        seed_scores: list[float] = []
        so_far = float("nan")
        for index, seed in enumerate(seeds):
            normalised = []
            for env_id, target in self.target_scores.items():
                start = time.time()
                score = self.run_once(flags, env_id, seed, exp_name, log_dir)
                scores[env_id].append(score)
                trial.set_user_attr("scores", scores)
                normalised.append(normalise(score, target))
                log({f"{env_id}_return": normalised[-1]})
                shown = "" if target is None else f", normalised {normalised[-1]:.4f}"
                took = time.time() - start
                self.print(f"trial {trial.number}: {env_id} seed {seed}: {self.metric} {score:.2f}{shown} ({took:.0f} s)")
            seed_scores.append(AGGREGATIONS[self.aggregation_type](normalised))
            log({"aggregated_normalized_score": seed_scores[-1]})
            trial.set_user_attr("seed_scores", seed_scores)
            so_far = float(np.mean(seed_scores))
            trial.report(so_far, step=index)
            self.print(
                f"trial {trial.number}: seed {seed}: {self.aggregation_type} score {seed_scores[-1]:.4f}; "
                f"mean of {plural(index + 1, 'seed')} {so_far:.4f}"
            )
            if index < len(seeds) - 1 and trial.should_prune():
                self.print(f"trial {trial.number}: pruned after seed {seed}")
                raise optuna.TrialPruned(f"pruned after seed {seed} with {so_far}")
        return so_far

    def distribution_problem(self, trial: optuna.Trial, error: ValueError) -> Optional[str]:
        """The parameter that `error`, raised by params_fn, came from, and why, or None when it did not come
        from a `trial.suggest_*` call. Optuna refuses a parameter drawn from another kind of distribution
        (or other categorical choices) than in the study's earlier trials, without naming it: a params_fn
        that changed since the study was made."""
        import optuna

        name = new = None
        tb = error.__traceback__
        while tb is not None:  # the innermost Trial._suggest(name, distribution) frame, if any
            frame = tb.tb_frame
            if frame.f_code.co_name == "_suggest" and isinstance(frame.f_locals.get("self"), optuna.trial.Trial):
                name, new = frame.f_locals.get("name"), frame.f_locals.get("distribution")
            tb = tb.tb_next
        if not isinstance(name, str) or new is None:
            return None
        trials = [t for t in trial.study.get_trials(deepcopy=False) if t.number != trial.number]
        old = next((t.distributions[name] for t in reversed(trials) if name in t.distributions), None)
        if old is not None and describe(old) != describe(new):
            return (
                f"the study {self.study_name!r} in {self.storage} was made with another search space: {name} was "
                f"{describe(old)}, not {describe(new)} (Optuna: {error}); draw it as before, or use another study name"
            )
        return f"params_fn: drawing {name} ({describe(new)}): {error}"

    def run_once(self, flags: list[str], env_id: str, seed: int, exp_name: str, log_dir: str) -> float:
        """One run of the command; returns its score, the mean of the last `metric_last_n_average_window`
        points of the metric in its run folder `runs/{env}__{exp_name}__{seed}__{time}`. Raises RunFailed."""
        name = env_id.replace("/", "-")
        argv = (*self.words, *flags, "--env-id", env_id, "--seed", str(seed), "--exp-name", exp_name)
        log_path = os.path.join(log_dir, f"{name}__{seed}.log")
        prefix = f"{name}__{exp_name}__{seed}__"
        before = set(os.listdir("runs")) if os.path.isdir("runs") else set()
        env = one_thread_env(dict(os.environ))[0] if self.one_thread else dict(os.environ)
        exit_code = run_one(Run(env_id, seed, argv, log_path), env)
        if exit_code != 0:
            raise RunFailed(env_id, seed, f"exit {exit_code}", log_path, exit_code)
        made = [
            entry
            for entry in (os.listdir("runs") if os.path.isdir("runs") else [])
            if entry.startswith(prefix) and entry[len(prefix) :].isdigit() and entry not in before
        ]
        if not made:
            raise RunFailed(env_id, seed, f"wrote no run folder runs/{prefix}{{time}}", log_path, exit_code)
        run_dir = os.path.join("runs", max(made, key=lambda entry: int(entry[len(prefix) :])))
        _, values = read_scalars(run_dir, self.metric)
        if len(values) == 0:
            raise RunFailed(env_id, seed, f"logged no {self.metric} in {run_dir} (too short a run?)", log_path, 0)
        score = float(np.mean(values[-self.metric_last_n_average_window :]))
        if not math.isfinite(score):
            raise RunFailed(env_id, seed, f"its {self.metric} is not finite ({score}) in {run_dir}", log_path, 0)
        return score

    def print_summary(self, study: optuna.Study, session: list) -> None:
        """What this session's trials came to, the failed ones with their logs, and the study's best trial
        with the command that reproduces one of its runs' settings."""
        from optuna.trial import TrialState

        counts = {state: sum(t.state == state for t in session) for state in (TrialState.COMPLETE, TrialState.PRUNED)}
        failed = [t for t in session if t.state == TrialState.FAIL]
        finished = sum(t.state.is_finished() for t in study.trials)
        self.print(
            f"{plural(len(session), 'trial')} run: {counts[TrialState.COMPLETE]} complete, "
            f"{counts[TrialState.PRUNED]} pruned, {len(failed)} failed; {finished} finished in the study"
        )
        for t in failed:
            info = t.user_attrs.get("failed_run")
            if info:
                run = f"{info['env_id']} seed {info['seed']}"
                self.print(f"  trial {t.number} failed: {run}: {info['reason']}; log {info['log']}")
        complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
        if not complete:
            self.print("no trial of the study has completed yet")
            return
        best = study.best_trial
        flags = best.user_attrs.get("flags", [])
        self.print(f"best trial {best.number}: value {best.value:.4f} ({self.direction}); parameters {best.params}")
        self.print(f"  {shlex.join([*shlex.split(self.command), *flags])}")

    def print(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def trial_seed(sampler_seed: int, number: int) -> int:
    """The seed of trial `number`'s sampler in a study tuned with `sampler_seed` (a 32-bit int from NumPy's
    SeedSequence of the two, so no two (seed, number) pairs share a random stream)."""
    return int(np.random.SeedSequence([sampler_seed, number]).generate_state(1)[0])


def seeded_per_trial(make_sampler: Callable[[int], optuna.samplers.BaseSampler], sampler_seed: int):
    """An Optuna sampler that, for each trial, makes a fresh `make_sampler(seed)` seeded with
    `trial_seed(sampler_seed, trial.number)` and draws the trial with it, e.g.
    `seeded_per_trial(lambda seed: optuna.samplers.TPESampler(seed=seed), 1)`.

    A sampler seeded once (`TPESampler(seed=1)`) starts its random stream over in every process, so a study
    resumed with it repeats the draws of its first trials. Seeded per trial instead, trial N's draw depends
    only on the seed, N and the trials before it: a resumed study goes on with new draws, 2 + 2 trials draw
    what 4 in one go do, and two fresh studies with the same seed draw the same trials. Parallel workers on
    one study get distinct trial numbers from the storage, hence distinct streams (not the same draws, as
    two workers seeded alike would make); which earlier trials TPE sees at each draw then depends on timing,
    so a parallel study is not exactly repeatable."""
    import optuna

    class SeededPerTrial(optuna.samplers.BaseSampler):
        def __init__(self):
            self.sampler = make_sampler(sampler_seed)  # until the first trial starts

        def before_trial(self, study, trial):
            self.sampler = make_sampler(trial_seed(sampler_seed, trial.number))
            self.sampler.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self.sampler.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, search_space):
            return self.sampler.sample_relative(study, trial, search_space)

        def sample_independent(self, study, trial, param_name, param_distribution):
            return self.sampler.sample_independent(study, trial, param_name, param_distribution)

        def after_trial(self, study, trial, state, values):
            self.sampler.after_trial(study, trial, state, values)

        def reseed_rng(self):
            self.sampler.reseed_rng()

        def __repr__(self):
            return f"seeded_per_trial({type(self.sampler).__name__}, {sampler_seed})"

    return SeededPerTrial()


class SpecParams:
    """The params_fn of `--params` specs: draws every spec's parameter, in order. Unlike a plain function its
    search space is known before any trial, so the Tuner stores it with the study and refuses to resume
    the study with another."""

    def __init__(self, specs: list[ParamSpec]):
        self.specs = tuple(specs)

    def __call__(self, trial: optuna.Trial) -> dict[str, Any]:
        return {spec.name: spec.suggest(trial) for spec in self.specs}

    def search_space(self) -> dict[str, str]:
        """{parameter name: its distribution as a spec}, as stored with the study."""
        return {spec.name: describe(spec.distribution()) for spec in self.specs}


def params_fn_from(specs: list[ParamSpec]) -> SpecParams:
    """The params_fn that draws every spec's parameter, in order, e.g.
    `params_fn_from([parse_param("learning-rate=loguniform:0.0003,0.003")])`."""
    return SpecParams(specs)


@dataclass
class Args:
    command: str
    """the training command; each run appends the trial's flags, --env-id, --seed and --exp-name (split with
    shell-word rules, no shell)"""
    target_scores: list[str]
    """ENV=MIN,MAX per env (normalised score (x - MIN) / (MAX - MIN)), or ENV to keep its raw score"""
    params: list[str]
    """NAME=KIND:VALUES per flag to tune; KIND is float:LOW,HIGH, loguniform:LOW,HIGH, int:LOW,HIGH[,STEP] or
    categorical:A,B,..."""
    metric: str = "charts/episodic_return"
    """the TensorBoard scalar tag that scores a run"""
    metric_last_n_average_window: int = 50
    """a run's score is the mean of its last N points of the metric"""
    direction: Literal["maximize", "minimize"] = "maximize"
    """whether a higher or a lower trial value is better"""
    aggregation_type: Literal["average", "median", "min", "max"] = "average"
    """how a seed's normalised env scores combine into one"""
    num_trials: int = 10
    """how many trials to add to the study"""
    num_seeds: int = 3
    """seeds per trial; the pruner may stop a trial after each but the last"""
    start_seed: int = 1
    """the first seed; a trial runs start_seed ... start_seed + num_seeds - 1"""
    sampler: Literal["tpe", "random"] = "tpe"
    """Optuna's sampler: TPESampler or RandomSampler"""
    sampler_seed: Optional[int] = None
    """seed of the sampler (None: a random one); trial N draws with a seed made of this and N, so a resumed
    study goes on with new, repeatable draws"""
    pruner: Literal["median", "none"] = "median"
    """Optuna's MedianPruner (stop a trial whose mean so far is worse than the median of earlier trials' after
    the same number of seeds), or none"""
    pruner_startup_trials: int = 5
    """trials that finish before the median pruner prunes anything"""
    storage: str = "sqlite:///tuner.db"
    """the study's database URL; running again with the same one and --study-name adds trials"""
    study_name: str = "tuner"
    """the study's name in the storage; its runs are named --exp-name {study_name}-trial{N}"""
    load_if_exists: bool = True
    """resume a study of that name (--no-load-if-exists refuses an existing one)"""
    log_dir: str = "tuner_logs"
    """where each run's output goes, one folder per trial"""
    max_consecutive_failures: int = 5
    """stop (exit 1) after this many failed trials in a row, a sign of a broken command (0: never)"""
    one_thread: bool = True
    """run each training on one compute thread (OMP_NUM_THREADS=1, XLA's single-thread flags) unless you set
    OMP_NUM_THREADS; --no-one-thread leaves torch's and JAX's defaults"""


def build_tuner(args: Args) -> Tuner:
    """The Tuner of the command-line values. Raises ValueError (one line) for the first problem."""
    targets = parse_target_scores(args.target_scores)
    if not args.params:
        raise ValueError("--params must name at least one flag to tune, e.g. learning-rate=loguniform:0.0003,0.003")
    specs = [parse_param(spec) for spec in args.params]
    names = [spec.name.replace("_", "-") for spec in specs]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"--params names {name} twice")
    try:
        command_flags = flag_names(shlex.split(args.command))
    except ValueError:
        command_flags = set()  # Tuner names the problem
    for name in names:
        if name in command_flags:
            raise ValueError(f"--{name} is both in --command and in --params; leave it out of one")
    for flag, value, least in [
        ("--num-trials", args.num_trials, 1),
        ("--num-seeds", args.num_seeds, 1),
        ("--start-seed", args.start_seed, 0),
        ("--pruner-startup-trials", args.pruner_startup_trials, 0),
        ("--max-consecutive-failures", args.max_consecutive_failures, 0),
        ("--sampler-seed", 0 if args.sampler_seed is None else args.sampler_seed, 0),
    ]:
        if value < least:
            raise ValueError(f"{flag} must be at least {least}, got {value}")
    tuner_args = dict(
        command=args.command,
        target_scores=targets,
        params_fn=params_fn_from(specs),
        metric=args.metric,
        direction=args.direction,
        aggregation_type=args.aggregation_type,
        metric_last_n_average_window=args.metric_last_n_average_window,
        storage=args.storage,
        study_name=args.study_name,
        load_if_exists=args.load_if_exists,
        log_dir=args.log_dir,
        one_thread=args.one_thread,
    )
    Tuner(**tuner_args)  # checks the rest before Optuna is imported
    try:
        import optuna
    except ImportError:
        raise ValueError("the tuner needs Optuna: pip install optuna (or the extra: pip install -e '.[optuna]')") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the tuner prints its own lines
    kind = optuna.samplers.TPESampler if args.sampler == "tpe" else optuna.samplers.RandomSampler
    if args.sampler_seed is None:
        sampler = kind()
    else:
        sampler = seeded_per_trial(lambda seed: kind(seed=seed), args.sampler_seed)
    if args.pruner == "median":
        pruner = optuna.pruners.MedianPruner(n_startup_trials=args.pruner_startup_trials)
    else:
        pruner = optuna.pruners.NopPruner()
    return Tuner(**tuner_args, sampler=sampler, pruner=pruner)


def main(args: Args) -> None:
    try:
        tuner = build_tuner(args)
        study = tuner.tune(args.num_trials, args.num_seeds, args.start_seed, args.max_consecutive_failures)
    except ValueError as e:
        print(f"tuner: {e}", file=sys.stderr)
        sys.exit(2)
    except RuntimeError as e:
        print(f"tuner: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("tuner: interrupted; the running trial is marked failed, run the same command to go on", file=sys.stderr)
        sys.exit(130)
    if not any(t.value is not None and t.state.name == "COMPLETE" for t in study.trials):
        print(f"tuner: no trial of the study {args.study_name!r} has completed; see the failed runs' logs", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    import tyro

    main(tyro.cli(Args))
