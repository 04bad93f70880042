"""Stand-in envs whose episodes end at known steps and whose observations say which step they are.

Every sub-env plays the same fixed pattern, whatever the actions: its episodes alternate between one that
terminates after `TERMINATE_AT` steps and one that a time limit truncates after `TIME_LIMIT` steps (gymnasium's
`TimeLimit`, from `max_episode_steps` in the registration). An observation is `[episode, t, 1, 0]` scaled by 1/10
(episode: the sub-env's episode count, from n for the n-th stand-in made; t: steps into it), so a test reads off
which step of which episode any stored observation is, and a true final observation (t = its length) differs
from the next episode's first (t = 0). Its last entry is (t / TIME_LIMIT)^(1 + n % 3) instead of 0: sub-envs that
play in step (the n-th and the n+2-th) differ even after a script's observation normalisation, an affine map per
sub-env that would make them alike. The reward of the step from t is 1 + t / 10. Every info also carries
`standin`: [episode, t, the raw reward], so a test can read the pattern where a script's wrappers normalise
observations and rewards.

Registered on import: `StandinDiscrete-v0` (Discrete(3) actions) and `StandinContinuous-v0` (Box actions with
different bounds per dimension).

`StandinAtari-v0` is an ale-py Atari game to the Atari scripts' wrappers (an `ale_py.AtariEnv` with lives, action
meanings and 210x160 RGB frames) that plays a fixed pattern of raw frames: every game has 2 lives, the first lost at
frame `LIFE_LOST_AT` (so `EpisodicLifeEnv` ends an episode there), even games end at frame `GAME_OVER_AT` and odd
ones are cut by a `ATARI_TIME_LIMIT`-frame time limit. Each frame says where it is in flat blocks that survive
resizing and grayscale: which stand-in made it (top left), its game (top right), its frame in the game (bottom).

`EnvpoolStandinAtari` and `EnvpoolStandinProcgen` do what the envpool scripts use of `envpool.make`, and
`StandinPettingZooAtari` what ppo_pettingzoo_ma_atari.py uses of a PettingZoo Atari game's `parallel_env`.
`StandinPlayground` is a MuJoCo Playground env in JAX for ppo_continuous_action_playground.py.
"""

import collections
import itertools
import types

import ale_py
import gymnasium as gym
import numpy as np
import pettingzoo

TERMINATE_AT, TIME_LIMIT, OBS_DIM = 3, 5, 4
MADE = itertools.count()  # the n-th stand-in made in this process starts at episode n, so sub-envs are out of step


def decode(obs):
    """(episode, t) integer arrays from observations (..., OBS_DIM) as the stand-ins make them."""
    obs = np.asarray(obs, dtype=np.float64)
    return np.rint(obs[..., 0] * 10).astype(int), np.rint(obs[..., 1] * 10).astype(int)


def reward(t):
    return 1.0 + t / 10


def terminates(episode, t):
    """Whether the step that leads to step t of `episode` ends it by termination (odd episodes never do)."""
    return episode % 2 == 0 and t == TERMINATE_AT


class Standin(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, action_space):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = action_space
        self.instance = next(MADE)
        self.episode, self.t = self.instance - 1, 0

    def _obs(self):
        shape = (self.t / TIME_LIMIT) ** (1 + self.instance % 3)
        return np.array([self.episode / 10, self.t / 10, 0.1, shape], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {"standin": np.array([self.episode, 0, 0.0])}

    def step(self, action):
        r = reward(self.t)
        self.t += 1
        info = {"standin": np.array([self.episode, self.t, r])}
        return self._obs(), r, terminates(self.episode, self.t), False, info


gym.register("StandinDiscrete-v0", lambda **kwargs: Standin(gym.spaces.Discrete(3)), max_episode_steps=TIME_LIMIT)
gym.register(  # kwargs: what a script passes gym.make (render_mode), not used
    "StandinContinuous-v0",
    lambda **kwargs: Standin(gym.spaces.Box(np.array([-1.0, -2.0]), np.array([1.0, 2.0]), dtype=np.float32)),
    max_episode_steps=TIME_LIMIT,
)


LIFE_LOST_AT, GAME_OVER_AT, ATARI_TIME_LIMIT = 40, 64, 80


class StandinAtari(ale_py.AtariEnv):
    """Not a real ALE: `AtariEnv.__init__` is not called, the wrappers only need what is defined here."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 60}

    def __init__(self, render_mode=None, **kwargs):  # kwargs: what gym.make passes an ALE id (frameskip, ...)
        self.observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.render_mode, self.ale = render_mode, self  # the wrappers ask `unwrapped.ale.lives()`
        self.instance, self.game, self.frame = next(MADE), -1, 0

    def get_action_meanings(self):
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def getFloat(self, name):  # noqa: N802  (ALE's name); the scripts ask for the sticky-action probability
        return 0.0

    def lives(self):
        return 2 if self.frame < LIFE_LOST_AT else 1

    def render(self):
        screen = np.empty((210, 160, 3), np.uint8)
        screen[:105, :80], screen[:105, 80:], screen[105:] = 20 + 40 * (self.instance % 6), 4 + 8 * self.game, 3 * self.frame
        return screen

    def reset(self, *, seed=None, options=None):
        gym.Env.reset(self, seed=seed)
        self.game, self.frame = self.game + 1, 0
        return self.render(), {}

    def step(self, action):
        self.frame += 1
        return self.render(), float(self.frame % 3 - 1), self.game % 2 == 0 and self.frame == GAME_OVER_AT, False, {}


def decode_atari(frames):
    """(instance, game, frame) integer arrays from 84x84 grayscale frames (..., 84, 84) of `StandinAtari`."""
    frames = np.asarray(frames, dtype=np.float64)
    return (
        np.rint((frames[..., 10, 10] - 20) / 40).astype(int),
        np.rint((frames[..., 10, 73] - 4) / 8).astype(int),
        np.rint(frames[..., 70, 40] / 3).astype(int),
    )


gym.register("StandinAtari-v0", StandinAtari, max_episode_steps=ATARI_TIME_LIMIT)


ENVPOOL_LIFE_LOST_AT, ENVPOOL_GAME_OVER_AT, ENVPOOL_TIME_LIMIT = 4, 8, 10


class EnvpoolStandinAtari:
    """What the envpool scripts use of `envpool.make(<Atari id>, env_type="gymnasium", episodic_life=True, ...)`,
    with envpool's NEXT_STEP autoreset: the step that ends an episode returns its true final observation and the
    next step of that env ignores its action and returns the first observation of the next one (a reset step).

    Sub-env e plays games whose agent steps t = 1, 2, ... follow a fixed pattern by game % 3: every game loses a life
    at t = `ENVPOOL_LIFE_LOST_AT` (terminated, info "terminated" 0: the game goes on after a reset step); game 0
    ends by a game over at `ENVPOOL_GAME_OVER_AT`; game 1 is cut by the time limit (`max_episode_steps`, 10 in the
    tests); game 2's game over falls on the time limit's last step, which envpool reports as truncated only, with
    info "terminated" 1. Frames are 84x84, `stack_num` stacked, in `decode_atari`'s blocks: (e, game, t). Rewards: the raw
    score is t % 3 - 1 + 2 * (t % 5 == 0), clipped to its sign."""

    def __init__(self, env_id, num_envs=1, seed=0, max_episode_steps=ENVPOOL_TIME_LIMIT, stack_num=4, **kwargs):
        self.num_envs, self.limit = num_envs, max_episode_steps
        self.single_observation_space = gym.spaces.Box(0, 255, (stack_num, 84, 84), np.uint8)
        self.single_action_space = gym.spaces.Discrete(4)
        self.observation_space = gym.spaces.Box(0, 255, (num_envs, stack_num, 84, 84), np.uint8)
        self.action_space = gym.spaces.MultiDiscrete([4] * num_envs)
        self.config = {"repeat_action_probability": 0.0, "max_episode_steps": max_episode_steps, "frame_skip": 4}
        self.config |= {"num_envs": num_envs, "seed": seed}
        self.spec = types.SimpleNamespace(config=types.SimpleNamespace(**self.config))
        self.stacks = np.zeros((num_envs, stack_num, 84, 84), np.uint8)
        self.game, self.t, self.ended, self.game_over = (np.zeros(num_envs, int) for _ in range(4))

    def _frame(self, e):
        frame = np.empty((84, 84), np.uint8)
        frame[:42, :42], frame[:42, 42:], frame[42:] = 20 + 40 * (e % 6), 4 + 8 * self.game[e], 3 * self.t[e]
        return frame

    def _info(self, rewards, game_over):
        n = self.num_envs
        return {"reward": rewards, "terminated": game_over.astype(np.int32), "elapsed_step": self.t.copy()} | {
            "env_id": np.arange(n, dtype=np.int32),
            "lives": np.where(self.t < ENVPOOL_LIFE_LOST_AT, 2, 1).astype(np.int32),
            "players": {"env_id": np.arange(n, dtype=np.int32)},
        }

    def reset(self, **kwargs):
        for e in range(self.num_envs):
            self.stacks[e] = self._frame(e)
        zeros = np.zeros(self.num_envs)
        return self.stacks.copy(), self._info(zeros, zeros.astype(bool))

    def step(self, actions):
        n = self.num_envs
        raw, terminated, truncated, game_over = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
        for e in range(n):
            if self.ended[e]:  # a reset step: the next episode's first observation, the action ignored
                # a new game, or the same game after a lost life (a step later: envpool presses FIRE there)
                self.game[e], self.t[e] = (self.game[e] + 1, 0) if self.game_over[e] else (self.game[e], self.t[e] + 1)
                self.stacks[e], self.ended[e], self.game_over[e] = self._frame(e), False, False
                continue
            self.t[e] += 1
            t, kind = self.t[e], self.game[e] % 3
            raw[e] = t % 3 - 1 + 2 * (t % 5 == 0)
            game_over[e] = (kind == 0 and t == ENVPOOL_GAME_OVER_AT) or (kind == 2 and t == self.limit)
            truncated[e] = t == self.limit and not (kind == 0 and t == ENVPOOL_GAME_OVER_AT)
            terminated[e] = (t == ENVPOOL_LIFE_LOST_AT or game_over[e]) and not truncated[e]
            self.ended[e], self.game_over[e] = terminated[e] or truncated[e], game_over[e] or truncated[e]
            self.stacks[e] = np.concatenate([self.stacks[e, 1:], self._frame(e)[None]])
        return self.stacks.copy(), np.sign(raw), terminated, truncated, self._info(raw, game_over)

    def render(self, env_ids=None):
        return np.zeros((1, 210, 160, 3), np.uint8)

    def close(self):
        pass


PROCGEN_ENDS = {0: 6, 1: None, 2: 10}  # by game % 3: the step t at which the game terminates (1: never)


class EnvpoolStandinProcgen(gym.vector.VectorEnv):  # a VectorEnv, as envpool's gymnasium envs are, for wrappers
    """What the Procgen scripts use of `envpool.make(<Procgen id>, env_type="gymnasium", ...)`: NEXT_STEP autoreset
    after a termination, no lives, and no time limit of its own (envpool does not stop Procgen games; the scripts cut
    them themselves and restart the cut env with `reset(env_id=...)`). Sub-env e starts at game e; its games follow a
    fixed pattern by game % 3: game 0 terminates at agent step t = 6, game 1 never (a time limit cuts it), game 2
    terminates at t = 10, the scripts' time limit in the tests. Frames are (3, 64, 64): channel 0 says e, channel 1 the
    game, channel 2 t (`decode_procgen`). Raw rewards: t % 3."""

    def __init__(self, env_id, num_envs=1, seed=0, **kwargs):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
        self.single_action_space = gym.spaces.Discrete(15)
        self.observation_space = gym.spaces.Box(0, 255, (num_envs, 3, 64, 64), np.uint8)
        self.action_space = gym.spaces.MultiDiscrete([15] * num_envs)
        self.config = {"max_episode_steps": 1000, "num_envs": num_envs, "seed": seed}
        self.spec = types.SimpleNamespace(config=types.SimpleNamespace(**self.config))
        self.game, self.t, self.ended = np.arange(num_envs) - 1, np.zeros(num_envs, int), np.zeros(num_envs, bool)
        self.metadata, self.render_mode = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}, None

    def _obs(self, ids):
        obs = np.empty((len(ids), 3, 64, 64), np.uint8)
        obs[:, 0] = (20 + 40 * (np.asarray(ids) % 6))[:, None, None]
        obs[:, 1], obs[:, 2] = (4 + 8 * self.game[ids])[:, None, None], (3 * self.t[ids])[:, None, None]
        return obs

    def _info(self, ids):
        ids = np.asarray(ids, dtype=np.int32)
        return {"env_id": ids, "elapsed_step": self.t[ids].astype(np.int32), "players": {"env_id": ids}}

    def reset(self, env_id=None, **kwargs):
        ids = np.arange(self.num_envs) if env_id is None else np.asarray(env_id)
        self.game[ids], self.t[ids], self.ended[ids] = self.game[ids] + 1, 0, False
        return self._obs(ids), self._info(ids)

    def step(self, actions, env_id=None):
        ids, rewards, terminated = np.arange(self.num_envs), np.zeros(self.num_envs), np.zeros(self.num_envs, bool)
        for e in ids:
            if self.ended[e]:  # a reset step: the next game's first observation, the action ignored
                self.game[e], self.t[e], self.ended[e] = self.game[e] + 1, 0, False
                continue
            self.t[e] += 1
            rewards[e] = self.t[e] % 3
            terminated[e] = self.ended[e] = self.t[e] == PROCGEN_ENDS[self.game[e] % 3]
        return self._obs(ids), rewards, terminated, np.zeros(self.num_envs, bool), self._info(ids)

    def render(self, env_ids=None):
        return np.zeros((1, 256, 256, 3), np.uint8)


def decode_procgen(obs):
    """(e, game, t) integer arrays from observations (..., 3, 64, 64) of `EnvpoolStandinProcgen`."""
    obs = np.asarray(obs, dtype=np.float64)
    return (
        np.rint((obs[..., 0, 0, 0] - 20) / 40).astype(int),
        np.rint((obs[..., 1, 0, 0] - 4) / 8).astype(int),
        np.rint(obs[..., 2, 0, 0] / 3).astype(int),
    )


PZ_GAME_OVER_AT, PZ_MAX_CYCLES = 24, 40  # frames; the tests pass the script --max-cycles PZ_MAX_CYCLES


class StandinPettingZooAtari(pettingzoo.ParallelEnv):
    """What ppo_pettingzoo_ma_atari.py uses of `pettingzoo.atari.<game>.parallel_env(max_cycles, ...)`: two players
    who see the same 210x160 RGB screen, and games that follow a fixed pattern by game % 3, whatever the actions:
    game 0 is over at frame `PZ_GAME_OVER_AT` (every player terminates), game 1 is cut by `max_cycles` (every player
    truncated, as PettingZoo's Atari games are), and game 2 is over on the time limit's last frame (both flags).
    Frames are `StandinAtari`'s blocks (`decode_atari`): which stand-in made it, its game, its frame in the game;
    the n-th stand-in made in a process starts at game n.
    Raw rewards: frame % 3 - 1 for the first player, the opposite for the second."""

    metadata = {"render_modes": ["rgb_array"], "name": "standin_v0", "is_parallelizable": True, "render_fps": 60}
    possible_agents = ["first_0", "second_0"]

    def __init__(self, max_cycles=100_000, render_mode=None, **kwargs):  # kwargs: auto_rom_install_path
        self.max_cycles, self.render_mode, self.agents = max_cycles, render_mode, []
        self.instance, self.frame = next(MADE), 0
        self.game = self.instance - 1  # the n-th made plays game n first, so its games are out of step with others'
        self.np_random = np.random.default_rng(0)  # SuperSuit's frame skip draws its skip length from it

    def observation_space(self, agent):
        return gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    render = StandinAtari.render

    def reset(self, seed=None, options=None):
        self.np_random = np.random.default_rng(seed)
        self.game, self.frame, self.agents = self.game + 1, 0, list(self.possible_agents)
        return dict.fromkeys(self.agents, self.render()), {agent: {} for agent in self.agents}

    def step(self, actions):
        self.frame += 1
        over_at = {0: PZ_GAME_OVER_AT, 1: None, 2: PZ_MAX_CYCLES}[self.game % 3]
        over, cut, reward = self.frame == over_at, self.frame >= self.max_cycles, float(self.frame % 3 - 1)
        observations, rewards = dict.fromkeys(self.agents, self.render()), {"first_0": reward, "second_0": -reward}
        terminations, truncations = dict.fromkeys(self.agents, over), dict.fromkeys(self.agents, cut)
        infos, self.agents = {agent: {} for agent in self.agents}, [] if over else self.agents
        return observations, rewards, terminations, truncations, infos


PlaygroundState = collections.namedtuple("PlaygroundState", "obs reward done info")  # a pytree, as Playground's State


class StandinPlayground:
    """What ppo_continuous_action_playground.py uses of a MuJoCo Playground env (`registry.load`), in JAX. A reset
    draws a number r in [0, 100) from its key; the episode then terminates after `TERMINATE_AT` steps where r is
    even and never where r is odd (the script's --episode-length cuts it). The observation at step t is
    [r / 100, t / 10, 0.1, (t / TIME_LIMIT)^(1 + r % 3)] and the reward of the step from t is `reward(t)`; the state's
    info carries `standin`: [r, t, the reward of the step that led here]."""

    observation_size, action_size, dt = OBS_DIM, 2, 0.05
    # the script reads its solver options (to quiet MJX's overflow warning where a task has one); this has none
    mjx_model = types.SimpleNamespace(opt=types.SimpleNamespace(_impl=types.SimpleNamespace()))

    @staticmethod
    def _obs(r, t):
        import jax.numpy as jnp

        return jnp.stack([r / 100, t / 10, jnp.full_like(r, 0.1), (t / TIME_LIMIT) ** (1 + r % 3)]).astype(jnp.float32)

    def reset(self, key):
        import jax
        import jax.numpy as jnp

        r = jax.random.randint(key, (), 0, 100).astype(jnp.float32)
        zero = jnp.zeros((), jnp.float32)
        return PlaygroundState(self._obs(r, zero), zero, zero, {"standin": jnp.stack([r, zero, zero])})

    def step(self, state, action):
        import jax.numpy as jnp

        r, t = state.info["standin"][0], state.info["standin"][1]
        step_reward = 1.0 + t / 10
        t = t + 1
        done = ((r % 2 == 0) & (t == TERMINATE_AT)).astype(jnp.float32)
        return PlaygroundState(self._obs(r, t), step_reward, done, {"standin": jnp.stack([r, t, step_reward])})


def decode_playground(obs):
    """(r, t) integer arrays from observations (..., OBS_DIM) of `StandinPlayground`."""
    obs = np.asarray(obs, dtype=np.float64)
    return np.rint(obs[..., 0] * 100).astype(int), np.rint(obs[..., 1] * 10).astype(int)
