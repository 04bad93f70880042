"""Evaluates a model saved by a script's `--save-model`, with that script's own networks and evaluation.

    python -m cleanrl_utils.enjoy --exp-name dqn --model-path runs/CartPole-v1__dqn__1__1700000000/dqn.cleanrl_model
    python -m cleanrl_utils.enjoy --exp-name ppo_atari --model-path PATH --capture-video --eval-episodes 3
    python -m cleanrl_utils.enjoy --exp-name ppo --hf-repository ORG/CartPole-v1-ppo-seed1
    python -m cleanrl_utils.enjoy --exp-name dqn --env-id CartPole-v1   # the Hub's cleanrl/CartPole-v1-dqn-seed1
    python enjoy.py --exp-name dqn_atari --env BreakoutNoFrameskip-v4 --eval-episodes 1   # in cleanrl_utils/

`--exp-name` names the script (`cleanrl/{exp_name}.py`, found beside this package whatever the working directory;
by default the one that saved the checkpoint, from the `exp_name` stored in it; a checkpoint saved by another
script is refused); it is imported, which runs only its top-level
definitions (its training sits under `if __name__ == "__main__":`), and its `evaluate` function plays
the saved model for `--eval-episodes` episodes on the env the checkpoint was trained on (`--env-id`, or
`--env`, when given, must match it). Videos, with `--capture-video`, go to `videos/{run_name}-eval/` (on the
scripts' RecordVideo schedule: episodes 0, 1, 8, 27, 64, ...).
The checkpoint comes from `--model-path` or from a Hub repository that a script's `--upload-model` pushed:
`--hf-repository`, or without either, as upstream CleanRL's enjoy, the repository a run of `--exp-name` on
`--env-id` with `--seed` pushed to `--hf-entity` (`{hf_entity}/{env_id}-{exp_name}-seed{seed}`, a '/' in the env id
written as '-', cleanrl_utils/huggingface.py's name). Its `{exp_name}.cleanrl_model` is downloaded into the
huggingface_hub cache (HF_ENDPOINT points at another Hub, HF_TOKEN or `hf auth login` gives access to private
ones, and with HF_HUB_OFFLINE=1 only the cache is read). It also runs as a file: `python cleanrl_utils/enjoy.py`.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Optional

import numpy as np
import tyro

SCRIPTS = Path(__file__).resolve().parents[1] / "cleanrl"


@dataclass
class Args:
    exp_name: Optional[str] = None
    """the script whose networks and evaluation are used, cleanrl/{exp_name}.py (None: the script that saved the checkpoint,
    from its stored args; needed to download one, where it also names the file {exp_name}.cleanrl_model)"""
    env_id: Annotated[Optional[str], tyro.conf.arg(aliases=("--env",))] = None
    """the env to evaluate on; must be the one the model was trained on (None: the checkpoint's); --env is the same"""
    model_path: Optional[str] = None
    """a checkpoint written by the script's --save-model"""
    hf_repository: Optional[str] = None
    """instead of --model-path: a Hugging Face Hub repository (ORG/NAME) the script's --upload-model pushed to (without
    either: the default repository, {hf_entity}/{env_id}-{exp_name}-seed{seed}, which needs --exp-name and --env-id)"""
    hf_entity: str = "cleanrl"
    """the user or org of the default Hub repository, {hf_entity}/{env_id}-{exp_name}-seed{seed}"""
    seed: int = 1
    """the training seed in the default Hub repository's name (the evaluation seeds from the checkpoint's own)"""
    eval_episodes: int = 10
    """how many episodes to play"""
    capture_video: bool = False
    """record the episodes to videos/{run_name}-eval/"""
    cuda: bool = True
    """use CUDA when available (torch scripts; JAX scripts use JAX's default device)"""


def scripts_that_evaluate() -> list[str]:
    """The names (file stems) of the scripts in cleanrl/ that define an `evaluate` function, sorted."""
    return sorted(p.stem for p in SCRIPTS.glob("*.py") if "\ndef evaluate(" in p.read_text())


def load_script(exp_name: str) -> ModuleType:
    """Imports cleanrl/{exp_name}.py as a module without running its training. Raises FileNotFoundError
    if there is no such script."""
    path = SCRIPTS / f"{exp_name}.py"
    if not path.is_file():
        raise FileNotFoundError(path)
    spec = importlib.util.spec_from_file_location(f"cleanrl_script_{exp_name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def is_torch_file(model_path: str) -> bool:
    """Whether the file at `model_path` is in torch's (zip) format, as torch scripts save; JAX twins save flax
    msgpack. Raises OSError if it cannot be read."""
    with open(model_path, "rb") as f:
        return f.read(2) == b"PK"


def is_jax_script(exp_name: str) -> bool:
    """Whether cleanrl/{exp_name}.py is a JAX twin (its networks are Flax modules)."""
    return "\nimport flax" in (SCRIPTS / f"{exp_name}.py").read_text()


def read_checkpoint(model_path: str) -> dict:
    """The checkpoint at `model_path` (loaded on the CPU, arrays and plain values only), a dict with `model` and
    `args`: a torch script's file (`torch.load(..., weights_only=True)`) or a JAX script's (flax msgpack, read
    with `flax.serialization.msgpack_restore`). Raises OSError if it cannot be read and ValueError if it is not
    a CleanRL checkpoint."""
    if is_torch_file(model_path):
        import torch

        try:
            checkpoint = torch.load(model_path, map_location="cpu", weights_only=True)
        except OSError:
            raise
        except Exception as e:  # pickle, zip and torch errors: the file is not a checkpoint
            raise ValueError(f"not a torch checkpoint ({type(e).__name__})") from e
    else:
        try:
            import flax.serialization
        except ImportError as e:
            raise ValueError("not a torch checkpoint, and flax (for JAX scripts' checkpoints) is not installed") from e
        try:
            with open(model_path, "rb") as f:
                checkpoint = flax.serialization.msgpack_restore(f.read())
        except OSError:
            raise
        except Exception as e:  # msgpack errors: neither format
            raise ValueError(f"not a torch checkpoint nor a JAX script's flax checkpoint ({type(e).__name__})") from e
    if not isinstance(checkpoint, dict) or "model" not in checkpoint or "env_id" not in checkpoint.get("args", {}):
        raise ValueError("not a CleanRL checkpoint (it needs 'model' and 'args' with 'env_id')")
    return checkpoint


def default_repository(args: Args) -> str:
    """The Hub repository a run of `--exp-name` on `--env-id` with `--seed` pushes to under `--hf-entity`
    (`{hf_entity}/{env_id}-{exp_name}-seed{seed}`, a '/' in the env id written as '-'): the scripts' --upload-model
    name, from cleanrl_utils/huggingface.py, and upstream CleanRL's."""
    from cleanrl_utils.huggingface import repo_id

    return repo_id(args, args.hf_entity)


def download_model(repo_id: str, exp_name: str, named: Optional[str] = None) -> str:
    """Downloads `{exp_name}.cleanrl_model` from the Hub repository `repo_id` (or finds it in the huggingface_hub
    cache) and returns its local path. `named` says where the name came from in messages (default: --hf-repository).
    Raises ValueError with a one-line reason, naming the repository, when it cannot."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import logging as hf_logging
    from huggingface_hub.utils import validate_repo_id

    # huggingface_hub retries an unreachable Hub for about 20 s, logging each try; the outcome is one line here
    hf_logging.set_verbosity_error()
    filename = f"{exp_name}.cleanrl_model"
    named = named or f"--hf-repository {repo_id!r}"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise ValueError(f"{named} is not a Hub repository id ({e})") from e
    print(f"downloading {filename} from {constants.ENDPOINT}/{repo_id}", flush=True)
    try:
        return hf_hub_download(repo_id, filename)
    except HFValidationError as e:
        raise ValueError(f"{named} is not a Hub repository id ({e})") from e
    except RepositoryNotFoundError as e:  # private repositories answer the same without the right token
        raise ValueError(f"no model repository {repo_id} on {constants.ENDPOINT} (or it is private: set HF_TOKEN)") from e
    except RevisionNotFoundError as e:
        raise ValueError(f"{repo_id} on {constants.ENDPOINT} has no main branch") from e
    except LocalEntryNotFoundError as e:  # offline, or the Hub did not answer, and the file is not in the cache
        if constants.HF_HUB_OFFLINE:
            raise ValueError(f"HF_HUB_OFFLINE is set and {repo_id}/{filename} is not in the huggingface_hub cache") from e
        raise ValueError(f"cannot reach the Hub at {constants.ENDPOINT} to download {repo_id}/{filename}") from e
    except EntryNotFoundError as e:
        raise ValueError(f"{repo_id} has no {filename}; was it pushed by {exp_name}.py --upload-model?") from e
    except Exception as e:  # other HTTP answers (401, 5xx), disk errors
        reason = (str(e).splitlines() or [""])[0] or type(e).__name__
        raise ValueError(f"cannot download {repo_id}/{filename} from {constants.ENDPOINT} ({reason})") from e


def validation_error(args: Args) -> Optional[str]:
    """The first problem with the command-line values as one line, or None. With --hf-repository, or with neither
    it nor --model-path (the default repository, `default_repository`), downloads the checkpoint and sets
    `args.model_path` to the local copy; without --exp-name, sets it to the script that saved the checkpoint."""
    scripts = scripts_that_evaluate()
    if args.exp_name is not None and args.exp_name not in scripts:
        return f"--exp-name {args.exp_name!r} is not a script that evaluates; choose from {', '.join(scripts)}"
    if args.model_path is not None and args.hf_repository is not None:
        return "give the model to evaluate with exactly one of --model-path and --hf-repository"
    if args.model_path is None and args.hf_repository is None and (args.exp_name is None or args.env_id is None):
        return (
            "give the model to evaluate with --model-path, --hf-repository, or --exp-name and --env-id (the Hub "
            "repository {hf_entity}/{env_id}-{exp_name}-seed{seed}, --hf-entity cleanrl and --seed 1 by default)"
        )
    if args.eval_episodes < 1:
        return f"--eval-episodes must be at least 1, got {args.eval_episodes}"
    if args.model_path is None:
        if args.hf_repository is not None:
            if args.exp_name is None:
                return "--hf-repository needs --exp-name: the script, which also names the file {exp_name}.cleanrl_model"
            repository, named = args.hf_repository, None
        else:
            repository = default_repository(args)
            named = f"the repository {repository!r} (--hf-entity/{{env_id}}-{{exp_name}}-seed{{seed}})"
        try:
            args.model_path = download_model(repository, args.exp_name, named)
        except ValueError as e:
            return str(e)
    try:
        checkpoint = read_checkpoint(args.model_path)
    except (OSError, ValueError) as e:
        return f"cannot read --model-path {args.model_path}: {e}"
    saved_by = checkpoint["args"].get("exp_name")
    if args.exp_name is None:
        if saved_by not in scripts:
            return (
                f"the checkpoint's exp_name {saved_by!r} is not a script here; name the script that saved it with --exp-name"
            )
        args.exp_name = saved_by
    elif saved_by in scripts and saved_by != args.exp_name:
        return f"the checkpoint was saved by {saved_by}.py, not {args.exp_name}.py; use --exp-name {saved_by}"
    torch_file = is_torch_file(args.model_path)
    if is_jax_script(args.exp_name) == torch_file:  # e.g. a checkpoint saved under a custom --exp-name
        kind, other = ("a torch", "a torch script") if torch_file else ("a flax (JAX)", "a JAX twin")
        return f"the checkpoint is {kind} file but {args.exp_name}.py is not {other}; name the script that saved it"
    trained_on = checkpoint["args"]["env_id"]
    if args.env_id is not None and args.env_id != trained_on:
        return f"the model was trained on {trained_on}, not --env-id {args.env_id}; evaluation uses the training env"
    return None


def main(args: Args) -> list[float]:
    error = validation_error(args)
    if error is not None:
        print(f"enjoy: {error}", file=sys.stderr)
        sys.exit(2)
    saved = read_checkpoint(args.model_path)["args"]
    env_id = saved["env_id"]
    dm_control = env_id.startswith("dm_control/")  # the DeepMind Control Suite, through Shimmy
    if args.capture_video or dm_control:
        os.environ.setdefault("MUJOCO_GL", "egl")  # headless MuJoCo rendering
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

    script = load_script(args.exp_name)  # imports what registers the script's envs (ale-py for Atari)
    error = None
    try:
        if hasattr(script, "env_error"):  # envs outside Gymnasium's registry (envpool, PettingZoo): the script checks
            error = script.env_error(env_id)
        elif not hasattr(script, "gym"):  # MuJoCo Playground's envs, in its own registry
            if env_id not in importlib.import_module("mujoco_playground").registry.ALL_ENVS:
                error = "not in MuJoCo Playground's registry"
        else:
            if dm_control:  # registered by the script's make_env, so here too before the check
                script.gym.register_envs(importlib.import_module("shimmy"))
            module, _, registered_id = env_id.rpartition(":")  # `module:EnvId`: gym.make imports the module first
            if module:
                importlib.import_module(module)
            script.gym.spec(registered_id)
    except Exception as e:  # an env this machine does not have (a missing extra or a custom registration)
        error = (str(e).splitlines() or [""])[0] or type(e).__name__
    if error is not None:
        print(f"enjoy: the checkpoint's env {env_id} cannot be made here ({error})", file=sys.stderr)
        sys.exit(2)
    run_name = f"{env_id.replace('/', '-')}__{args.exp_name}__enjoy__{int(time.time())}"
    options = {"capture_video": args.capture_video}
    # the evaluation seeds its env from the training seed + 100,000; its other draws (the ε-greedy coin, a sampled
    # action) come from the global generators, seeded here the same way so that two calls play the same episodes
    seed = saved["seed"] + 100_000
    random.seed(seed)
    np.random.seed(seed)
    if "device" in inspect.signature(script.evaluate).parameters:  # torch scripts; JAX picks its own device
        import torch

        torch.manual_seed(seed)
        options["device"] = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    try:
        returns = script.evaluate(args.model_path, args.eval_episodes, run_name, **options)
    except Exception as e:  # other networks' weights or spaces, settings this script's model needs
        # (a checkpoint saved under a custom --exp-name is only matched to its script here, by trying it)
        first_line = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
        if isinstance(e, KeyError):
            first_line = f"its args lack {e}"
        print(f"enjoy: the checkpoint does not fit {args.exp_name}.py's networks ({first_line})", file=sys.stderr)
        sys.exit(2)
    for i, episodic_return in enumerate(returns):
        print(f"episode {i}: return {episodic_return:.2f}")
    if len(returns) < args.eval_episodes:  # the scripts stop an evaluation at an episode that runs 100,000 steps
        print(
            f"enjoy: warning: evaluation episode {len(returns) + 1} did not end in 100,000 steps (does {env_id} have a "
            f"time limit?); {len(returns)} of {args.eval_episodes} evaluated"
        )
        if not returns:  # nothing to report: not a successful evaluation
            sys.exit(1)
    mean = sum(returns) / len(returns)
    std = (sum((r - mean) ** 2 for r in returns) / len(returns)) ** 0.5
    episodes = "1 episode" if len(returns) == 1 else f"{len(returns)} episodes"
    print(f"{args.exp_name} on {env_id}: {mean:.2f} ± {std:.2f} over {episodes}")
    if args.capture_video:
        print(f"videos in videos/{run_name}-eval/")
    return returns


if __name__ == "__main__":
    if not __package__ and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        # run as a file (python enjoy.py, python cleanrl_utils/enjoy.py): import this checkout's cleanrl_utils, and
        # not this folder's modules (report, image, benchmark, ...) as top-level ones
        sys.path[0] = str(Path(__file__).resolve().parents[1])
    main(tyro.cli(Args))
