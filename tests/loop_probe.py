"""Runs a script's own training loop on a stand-in env and keeps what the loop computed, for tests to check by hand.

    python tests/loop_probe.py REQUEST.json OUT.pkl

REQUEST: {"script": path, "args": [...], "stop_at": a global name or null, "keep": [expressions],
          "value": an expression or null, "sample": an int or null, "watch": {name: expression} (optional),
          "envpool": true to make `envpool.make` give tests/standin_envs.py's EnvpoolStandinAtari, "procgen" its
                     EnvpoolStandinProcgen (then the steps recorded are those of the script's `envs`, which wraps
                     the stand-in: what the loop receives) (optional),
          "pettingzoo": true to add StandinPettingZooAtari as the PettingZoo Atari game `standin_v0` (the steps
                        recorded are those of the script's `envs`, SuperSuit's vector env) (optional),
          "playground": true to make `mujoco_playground.registry.load` give StandinPlayground (the steps recorded
                        are the calls of the script's jitted `env_step`, with the script's observation statistics
                        `obs_rms` as each call found them, under "stats") (optional),
          "values_by": "module:function" of tests/ that computes "values" itself, for recurrent agents (optional),
          "go_on": true to take what is kept at `stop_at` and let the run go on to its end (optional),
          "keep_at_end": [expressions] evaluated when the run has ended, as "kept_at_end" (optional)}

The script runs as `python SCRIPT ARGS` would run it, in this process, with two additions:
- every `reset` and `step` of its gymnasium vector env (or envpool stand-in) is recorded as the loop received it
  (where it makes several, the steps kept are those of the one it reset last: the one its loop plays):
  observations, rewards, terminations, truncations and the true final observations of the episodes that ended,
  the stand-in's own [episode, t, raw reward] of each (its info, which a script's normalising wrappers leave
  alone), and the value of each `watch` expression (e.g. a checksum of a network's weights) as the step is asked for;
- with `stop_at`, the run stops at the first line of the script's top level where that global name is bound (e.g.
  `returns`, bound once the first rollout's advantages are computed, before any update changes a weight).

At the stop (or the end of the run) the driver keeps the values of the expressions in `keep`, evaluated in the
script's globals (tensors and JAX arrays as NumPy); evaluates `value`, an expression of the script's globals that
maps a NumPy batch of observations to their values, on every recorded observation and final observation; and with
`sample` draws that many transitions from the script's replay memory `rb` (`rb.sample(n)`: obs, actions, rewards,
next_obs, dones). OUT holds
{"steps": [...], "reset": obs, "kept": {...}, "values": {...}, "sample": (...), "all_steps": [...]}: "steps" are
those recorded up to the stop, "all_steps" those of the whole run (the same where it stopped there).
"""

import importlib
import importlib.machinery
import json
import os
import pickle
import sys
import types

import gymnasium as gym
import numpy as np

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
import standin_envs  # noqa: E402,F401  (registers the stand-ins)


class Stop(Exception):
    pass


def as_numpy(value):
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if type(value).__module__.startswith("jax"):
        return np.asarray(value)
    return value


def main():
    request, out_path = json.load(open(sys.argv[1])), sys.argv[2]
    script = os.path.abspath(request["script"])
    records, recorded = {}, {"reset": None, "reset_ids": np.array([]), "steps": []}

    def record_of(env, reset=False):
        """Each vector env its own record; `recorded` is that of the env reset last, the one the loop plays (QDagger
        scores its teacher on one env, fills a memory from another, then trains on a third)."""
        nonlocal recorded
        record = records.setdefault(id(env), {"env": env, "reset": None, "reset_ids": np.array([]), "steps": []})
        if reset:
            recorded = record
        return record

    run = {"__name__": "__main__", "__file__": script}  # the script's globals

    reset, step = gym.vector.SyncVectorEnv.reset, gym.vector.SyncVectorEnv.step

    def recording_reset(self, **kwargs):
        obs, infos = reset(self, **kwargs)
        record = record_of(self, reset=True)
        record["reset"], record["reset_ids"] = np.array(obs), np.array(infos.get("standin", []))
        return obs, infos

    def recording_step(self, actions):
        watched = {name: float(eval(expression, run)) for name, expression in request.get("watch", {}).items()}
        obs, rewards, terminations, truncations, infos = step(self, actions)
        ended = terminations | truncations
        final = {int(i): np.array(infos["final_obs"][i]) for i in np.nonzero(ended)[0]}
        final_ids = {
            int(i): np.array(infos["final_info"]["standin"][i])
            for i in np.nonzero(ended)[0]
            if "standin" in infos.get("final_info", {})
        }
        record_of(self)["steps"].append(
            {"obs": np.array(obs), "rewards": np.array(rewards), "terminations": np.array(terminations)}
            | {"truncations": np.array(truncations), "final_obs": final}
            | {"ids": np.array(infos.get("standin", [])), "final_ids": final_ids, "watch": watched}
        )
        return obs, rewards, terminations, truncations, infos

    gym.vector.SyncVectorEnv.reset, gym.vector.SyncVectorEnv.step = recording_reset, recording_step

    class RecordingEnvpool(standin_envs.EnvpoolStandinAtari):  # NEXT_STEP: an ended step's obs is its final obs
        def reset(self, **kwargs):
            obs, infos = super().reset(**kwargs)
            record = record_of(self, reset=True)
            record["reset"], record["reset_ids"] = obs.copy(), np.array([])
            return obs, infos

        def step(self, actions):
            watched = {name: float(eval(expression, run)) for name, expression in request.get("watch", {}).items()}
            obs, rewards, terminations, truncations, infos = super().step(actions)
            record_of(self)["steps"].append(
                {"obs": obs.copy(), "rewards": rewards, "terminations": terminations, "truncations": truncations}
                | {"game_over": infos["terminated"].astype(bool), "watch": watched}
            )
            return obs, rewards, terminations, truncations, infos

    def record_the_loops_envs(envs):
        """Records what the loop itself receives from `envs` (the script's global, with all its wrappers)."""
        reset, step = envs.reset, envs.step

        def recording_reset(**kwargs):
            obs, infos = reset(**kwargs)
            record = record_of(envs, reset=True)
            record["reset"], record["reset_ids"] = np.array(obs), np.array([])
            return obs, infos

        def recording_step(actions):
            watched = {name: float(eval(expression, run)) for name, expression in request.get("watch", {}).items()}
            obs, rewards, terminations, truncations, infos = step(actions)
            ended = np.nonzero(np.asarray(terminations) | np.asarray(truncations))[0]
            final = {int(i): np.array(infos[i]["terminal_observation"]) for i in ended if isinstance(infos, list)}
            record_of(envs)["steps"].append(
                {"obs": np.array(obs), "rewards": np.array(rewards), "terminations": np.array(terminations)}
                | {"truncations": np.array(truncations), "game_over": np.zeros(len(obs), bool), "watch": watched}
                | {"final_obs": final}  # SuperSuit's vector env: the true final observations in a list of infos
            )
            return obs, rewards, terminations, truncations, infos

        envs.reset, envs.step = recording_reset, recording_step

    recorded_envs = []  # the object whose calls are recorded, where the probe follows the script's `envs`

    def follow_envs(frame):  # each time the script binds `envs` anew (a wrapper around the last), record the new one
        envs = frame.f_globals.get("envs")
        if envs is not None and (not recorded_envs or envs is not recorded_envs[-1]):
            if recorded_envs:
                del recorded_envs[-1].reset, recorded_envs[-1].step
            record_the_loops_envs(envs)
            recorded_envs.append(envs)

    if request.get("envpool") == "procgen":
        import envpool

        envpool.make = standin_envs.EnvpoolStandinProcgen
        game = types.SimpleNamespace(max_episode_steps=1000)  # no Procgen to load (it needs Qt): its spec's time limit
        envpool.make_spec = lambda env_id, **kwargs: types.SimpleNamespace(config=game)
    elif request.get("envpool"):
        import envpool

        envpool.make = RecordingEnvpool
    if request.get("pettingzoo"):
        from pettingzoo.atari.all_modules import atari_environments

        game = types.ModuleType("pettingzoo.atari.standin_v0")
        game.parallel_env = standin_envs.StandinPettingZooAtari
        sys.modules[game.__name__] = atari_environments["atari/standin_v0"] = game
    follows_envs = request.get("envpool") == "procgen" or request.get("pettingzoo")

    def record_playground_steps(frame):  # once the script binds its jitted `env_step`, each call is recorded
        env_step = frame.f_globals.get("env_step")
        if env_step is None or getattr(env_step, "recorded", False):
            return

        def recording_step(state, t, action, fresh):
            watched = {name: float(eval(expression, run)) for name, expression in request.get("watch", {}).items()}
            record = record_of(env_step, reset=not recorded["steps"] and recorded["reset"] is None)
            if record["reset"] is None:  # the first call steps the states of the script's first reset
                record["reset"], record["reset_ids"] = np.array(state.obs), np.array(state.info["standin"])
            stats = (np.array(as_numpy(run["obs_rms"].mean)), np.array(as_numpy(run["obs_rms"].var)))
            out = env_step(state, t, action, fresh)
            next_state, _, final_obs, rewards, terminations, truncations = out
            ended = np.nonzero(np.asarray(terminations) | np.asarray(truncations))[0]
            record["steps"].append(
                {"obs": np.array(next_state.obs), "rewards": np.array(rewards), "terminations": np.array(terminations)}
                | {"truncations": np.array(truncations), "final_obs": {int(i): np.array(final_obs[i]) for i in ended}}
                | {"ids": np.array(next_state.info["standin"]), "stats": stats, "watch": watched}
            )
            return out

        recording_step.recorded = True
        frame.f_globals["env_step"] = recording_step

    if request.get("playground"):
        playground = types.ModuleType("mujoco_playground")
        playground.__spec__ = importlib.machinery.ModuleSpec("mujoco_playground", None)
        playground.registry = types.SimpleNamespace(load=lambda env_id, **kwargs: standin_envs.StandinPlayground())
        sys.modules["mujoco_playground"] = playground

    code = compile(open(script).read(), script, "exec")

    def snapshot():
        """What the tests check, taken at the stop from the steps recorded so far (copies: the loop reuses buffers)."""
        taken_from.append(recorded)
        so_far = {"reset": recorded["reset"], "reset_ids": recorded["reset_ids"], "steps": list(recorded["steps"])}
        result = so_far | {"values": {}, "sample": None}
        result["kept"] = {name: np.array(as_numpy(eval(name, run))) for name in request["keep"]}
        if request.get("values_by"):  # "module:function" of tests/, called with the script's globals and the record
            module, function = request["values_by"].split(":")
            result["values"] = getattr(importlib.import_module(module), function)(run, so_far)
        elif request["value"]:
            value = eval(request["value"], run)
            obs = np.concatenate([so_far["reset"]] + [s["obs"] for s in so_far["steps"]])
            result["values"]["obs"] = np.asarray(as_numpy(value(obs))).reshape(len(so_far["steps"]) + 1, -1)
            finals = [(k, i, o) for k, s in enumerate(so_far["steps"]) for i, o in s.get("final_obs", {}).items()]
            if finals:
                values = np.asarray(as_numpy(value(np.stack([o for _, _, o in finals])))).reshape(-1)
                result["values"]["final"] = {(k, i): float(v) for (k, i, _), v in zip(finals, values)}
        if request["sample"]:
            result["sample"] = tuple(np.array(as_numpy(x)) for x in run["rb"].sample(request["sample"]))
        return result

    taken, taken_from = [], []  # the snapshot, and the record it was taken from

    def at_line(frame, event, arg):
        if event == "line" and follows_envs:
            follow_envs(frame)
        if event == "line" and request.get("playground"):
            record_playground_steps(frame)
        if event == "line" and request["stop_at"] in frame.f_globals:
            if not request.get("go_on"):
                raise Stop
            taken.append(snapshot())  # then the run goes on, untraced, to its end
            sys.settrace(None)
            frame.f_trace = None
            return None
        return at_line

    def tracer(frame, event, arg):
        return at_line if frame.f_code is code else None

    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(script)
    if request["stop_at"]:
        sys.settrace(tracer)
    try:
        exec(code, run)
        if not request["stop_at"]:
            taken.append(snapshot())
    except Stop:
        taken.append(snapshot())
    finally:
        sys.settrace(None)
    if not taken:
        sys.exit(f"loop_probe: the run ended without binding {request['stop_at']!r}")
    result = taken[0] | {"all_steps": taken_from[0]["steps"]}
    result["kept_at_end"] = {name: np.array(as_numpy(eval(name, run))) for name in request.get("keep_at_end", [])}
    with open(out_path, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main()
