"""The Hugging Face Hub upload shared by every script in `cleanrl/` (their `--upload-model` flag).

A script imports this module only inside its `--upload-model` branch, so a script copied alone runs every other
flag. At start-up it calls `upload_error(args)` (no network call) and stops with exit code 2 on a message; after
training, evaluation and `writer.close()` it calls `push_to_hub(...)`, which pushes the run in one commit and, on
failure, stops with exit code 1 and one line, everything local kept.

The repository is CleanRL's: `{hf_entity or the token's user}/{env_id}-{exp_name}-seed{seed}`, holding the
checkpoint `{exp_name}.cleanrl_model`, a model card (README.md, also written to `runs/{run_name}/README.md`), the
last evaluation video as `replay.mp4`, the TensorBoard events of the run and the script itself.
The endpoint (HF_ENDPOINT) and the token (HF_TOKEN or the one `hf auth login` saved) come from huggingface_hub.
"""

import hashlib
import os
import platform
import re
import shlex
import sys
import time


def repo_id(args, entity):
    """The Hub repository of a run: `{entity}/{env_id}-{exp_name}-seed{seed}` (a '/' in env_id becomes '-')."""
    return f"{entity}/{args.env_id.replace('/', '-')}-{args.exp_name}-seed{args.seed}"


def upload_error(args):
    """Why `--upload-model` cannot work for this command line, as one line, or None.

    Checks that `--save-model` is on, that huggingface_hub imports, that the repository id is valid and that a
    token is there (HF_TOKEN, then the file `hf auth login` writes). Makes no network call.
    """
    if not args.save_model:
        return "--upload-model pushes the saved model and its evaluation; add --save-model"
    try:
        from huggingface_hub import get_token
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        return "--upload-model needs huggingface_hub (pip install huggingface-hub)"
    name = repo_id(args, args.hf_entity or "user")
    try:
        validate_repo_id(name)
    except HFValidationError:
        return (
            f"{name!r} is not a valid Hub repository id: a name of letters, digits, -, _ and . (no '--' or '..', "
            "no - or . at either end), 96 characters at most; change --hf-entity or --exp-name"
        )
    if get_token() is None:
        return (
            "--upload-model needs a Hugging Face token: run `hf auth login` "
            "(older huggingface_hub: `huggingface-cli login`) or set HF_TOKEN"
        )
    return None


def _versions(jax):
    """(names, versions) of the packages a run used: torch, or jax/flax/optax for the JAX scripts."""
    import importlib.metadata

    names = ["jax", "flax", "optax"] if jax else ["torch"]
    names += ["gymnasium", "numpy", "huggingface_hub"]
    return ["python", *names], [platform.python_version(), *(importlib.metadata.version(n) for n in names)]


def model_card(args, repo, episodic_returns, video, script_path, algorithm, description, command=None):
    """The README.md of a run's Hub repository, as a string: Hub metadata (tags, `model-index` with the mean
    evaluation return), the evaluation, how to load and reproduce the run, its hyperparameters and versions.

    `algorithm` is the short name shown as the model's name ("DQN", "SAC (JAX)"), `description` what it stands for
    ("Deep Q-Network"); `episodic_returns` the evaluation returns; `video` the card's video file name or None;
    `command` the command line (default: this process's, as `python SCRIPT ARGS`).
    """
    import numpy as np

    script = os.path.basename(script_path)
    with open(script_path, "rb") as f:
        script_sha256 = hashlib.sha256(f.read()).hexdigest()
    # no episode may have ended (an env without a time limit): NaN, without numpy's empty-mean warning
    mean, std = (float(np.mean(episodic_returns)), float(np.std(episodic_returns))) if episodic_returns else (np.nan, np.nan)
    command = command or shlex.join(["python", script, *sys.argv[1:]])
    hyperparameters = "\n".join(f"| {key} | {value} |" for key, value in vars(args).items())
    jax = "_jax" in script  # the JAX twins' names say so
    names, versions = _versions(jax)
    names.append(f"{script} sha256")
    versions.append(script_sha256)
    if jax:
        loading = (
            "The checkpoint is a flax msgpack file: `flax.serialization.msgpack_restore(open(path, 'rb').read())` "
            "gives a dict whose `model` holds the parameters (restore them into the script's networks with "
            "`flax.serialization.from_state_dict`) and whose `args` holds the run's arguments."
        )
    else:
        loading = (
            "The checkpoint loads with `torch.load(path, weights_only=True)`: a dict whose `model` holds the "
            "networks' state dicts and whose `args` holds the run's arguments."
        )
    video_line = f"The video `{video}` shows an evaluation episode.\n" if video else ""
    return f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- custom-implementation
library_name: cleanrl
model-index:
- name: {algorithm}
  results:
  - task:
      type: reinforcement-learning
      name: reinforcement-learning
    dataset:
      name: {args.env_id}
      type: {args.env_id}
    metrics:
    - type: mean_reward
      value: {mean:.2f} +/- {std:.2f}
      name: mean_reward
      verified: false
---

# {algorithm} agent playing {args.env_id}

A {algorithm} ({description}) agent trained on `{args.env_id}` by CleanRL's single-file script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Episodic return over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{video_line}
## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo}
```

{loading}

## Reproduce

```
{command}
```

## Hyperparameters

| param | value |
|-|-|
{hyperparameters}

## Versions

| {" | ".join(names)} |
|{"-|" * len(names)}
| {" | ".join(versions)} |
"""


def _push(args, run_name, episodic_returns, script_path, algorithm, description, attempts, command):
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    run_dir, video_dir = f"runs/{run_name}", f"videos/{run_name}-eval"
    videos = sorted(
        (name for name in os.listdir(video_dir) if name.endswith(".mp4")) if os.path.isdir(video_dir) else [],
        key=lambda name: [int(n) for n in re.findall(r"\d+", name)],
    )
    files = {f"{args.exp_name}.cleanrl_model": f"{run_dir}/{args.exp_name}.cleanrl_model"}
    files |= {name: f"{run_dir}/{name}" for name in sorted(os.listdir(run_dir)) if name.startswith("events.out.tfevents")}
    files[os.path.basename(script_path)] = script_path
    if videos:
        files["replay.mp4"] = f"{video_dir}/{videos[-1]}"
    for attempt in range(1, attempts + 1):
        try:
            repo = repo_id(args, args.hf_entity or api.whoami()["name"])
            card_path = f"{run_dir}/README.md"
            video = "replay.mp4" if videos else None
            with open(card_path, "w") as f:
                f.write(model_card(args, repo, episodic_returns, video, script_path, algorithm, description, command))
            repo_url = api.create_repo(repo, exist_ok=True)
            operations = [CommitOperationAdd(path_in_repo, local) for path_in_repo, local in files.items()]
            operations.append(CommitOperationAdd("README.md", card_path))
            api.create_commit(repo, operations, commit_message=f"{args.exp_name} on {args.env_id}: run {run_name}")
            return str(repo_url)
        except Exception as e:
            status = getattr(getattr(e, "response", None), "status_code", None)
            if attempt == attempts or (status is not None and status < 500 and status != 429):
                raise
            time.sleep(2 ** (attempt - 1))


def push_to_hub(args, run_name, episodic_returns, script_path, algorithm, description, attempts=3, command=None):
    """Pushes a finished run to the Hub in one commit and prints `model uploaded to URL`; returns the URL.

    Run from the folder the script ran in: it reads `runs/{run_name}/{exp_name}.cleanrl_model`, the events files
    there and `videos/{run_name}-eval/*.mp4` (the last one by episode number becomes `replay.mp4`).
    `args` is the script's Args; `episodic_returns` the evaluation returns (floats); `script_path` the script
    (`__file__`); `algorithm`/`description` name it on the model card, `command` is the card's command line (see
    `model_card`; a script launched by torchrun passes its torchrun line).
    huggingface_hub does not retry commits, so network errors, 5xx and 429 are retried here (`attempts` in all,
    waiting 1 s, 2 s, ...); other client errors (401, 403, 404) are not. When the push fails, prints one line
    saying so (the run stays in `runs/{run_name}`) and exits with code 1.
    """
    try:
        url = _push(args, run_name, episodic_returns, script_path, algorithm, description, attempts, command)
    except Exception as e:
        reason = (str(e).splitlines() or [""])[0] or type(e).__name__
        print(
            f"{os.path.basename(script_path)}: --upload-model could not push the run to the Hub ({reason}); "
            f"everything is kept in runs/{run_name}",
            file=sys.stderr,
        )
        sys.exit(1)
    print(f"model uploaded to {url}")
    return url
