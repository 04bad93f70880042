"""Tiny budgets that run each script through every code path in seconds, shared by the test files."""

# PPO: two iterations of a small batch
PPO_TINY = {
    "ppo.py": ["--total-timesteps", 256, "--num-envs", 2, "--num-steps", 64],
    "ppo_atari.py": ["--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1],
    "ppo_continuous_action.py": ["--total-timesteps", 256, "--num-steps", 128, "--num-minibatches", 4],
}
# MuJoCo renders slowly on the CPU: film short InvertedPendulum episodes rather than HalfCheetah's 1000 steps
MUJOCO_VIDEO = ["--env-id", "InvertedPendulum-v5"]
CONTINUOUS_SCRIPTS = [  # every script with Box actions
    "ppo_continuous_action.py",
    "rpo_continuous_action.py",
    "sac_continuous_action.py",
    "td3_continuous_action.py",
    "ddpg_continuous_action.py",
    "sac_continuous_action_jax.py",
    "td3_continuous_action_jax.py",
    "ddpg_continuous_action_jax.py",
]
VIDEO_ENV = dict.fromkeys(CONTINUOUS_SCRIPTS, MUJOCO_VIDEO)
ATARI_BUFFER = ["--buffer-size", 1000, "--batch-size", 8]
CLASSIC_BUFFER = ["--buffer-size", 500, "--batch-size", 32]
# value-based: a few hundred env steps with learning from the start
VALUE_BASED_TINY = {
    "dqn.py": ["--total-timesteps", 700, "--learning-starts", 200, "--train-frequency", 1, *CLASSIC_BUFFER],
    "c51.py": ["--total-timesteps", 700, "--learning-starts", 200, "--train-frequency", 1, *CLASSIC_BUFFER],
    "qr_dqn.py": ["--total-timesteps", 700, "--learning-starts", 200, "--train-frequency", 1, *CLASSIC_BUFFER],
    "pqn.py": ["--total-timesteps", 512, "--num-envs", 2, "--num-steps", 64],
    "dqn_atari.py": ["--total-timesteps", 400, "--learning-starts", 200, "--train-frequency", 1, *ATARI_BUFFER],
    "c51_atari.py": ["--total-timesteps", 400, "--learning-starts", 200, "--train-frequency", 1, *ATARI_BUFFER],
    "qr_dqn_atari.py": ["--total-timesteps", 400, "--learning-starts", 200, "--train-frequency", 1, *ATARI_BUFFER],
    # Rainbow's network has 6.8M parameters (noisy dueling head): a gradient step costs ~0.2 s of one core, so the
    # 100 it takes to log its losses once, not 200
    "rainbow_atari.py": ["--total-timesteps", 400, "--learning-starts", 300, "--train-frequency", 1, *ATARI_BUFFER],
}
# continuous control: a few hundred MuJoCo steps (Hopper-v5 by default) with learning from step 100
CONTINUOUS_BUFFER = ["--learning-starts", 100, "--buffer-size", 500, "--batch-size", 32]
CONTINUOUS_TINY = {
    "sac_continuous_action.py": ["--total-timesteps", 300, *CONTINUOUS_BUFFER],
    "td3_continuous_action.py": ["--total-timesteps", 300, *CONTINUOUS_BUFFER],
    "ddpg_continuous_action.py": ["--total-timesteps", 300, *CONTINUOUS_BUFFER],
    "rpo_continuous_action.py": ["--total-timesteps", 256, "--num-steps", 128, "--num-minibatches", 4],
    # the first Breakout game under random actions ends at step 291: learning from 300 logs an episode
    "sac_atari.py": [
        "--total-timesteps",
        400,
        "--learning-starts",
        300,
        "--update-frequency",
        1,
        "--target-network-frequency",
        100,
        *ATARI_BUFFER,
    ],
}
TINY = PPO_TINY | VALUE_BASED_TINY | CONTINUOUS_TINY
# QDagger (not in TINY: it also needs --teacher-model-path, a teacher like conftest's `teacher_path`): every phase,
# a few steps each
QDAGGER_TINY = [
    "--teacher-eval-episodes", 1,
    "--teacher-steps", 64,
    "--offline-steps", 10,
    "--offline-eval-episodes", 1,
    "--total-timesteps", 600,
    "--learning-starts", 0,
    "--train-frequency", 16,
    "--buffer-size", 1000,
    "--batch-size", 4,
]  # fmt: skip

# The issue-7 variants (PPO-LSTM, envpool, multi-process, PettingZoo, Procgen, RND, PQN on envpool): each test file
# runs its own default and copied-file runs with these, so they are not in TINY (test_scripts.py would run them
# again); the Hub round trip (-m hub_all) uses them too. Short time limits make games (and the 10 evaluation
# games) end inside the budget.
VARIANT_TINY = {
    "ppo_atari_lstm.py": [
        "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1,
        "--max-episode-steps", 40,
    ],
    # two iterations of 2 envs x 32 steps; Montezuma's random play scores 0
    "ppo_rnd_envpool.py": [
        "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1,
        "--num-iterations-obs-norm-init", 1, "--max-episode-steps", 40,
    ],
    "pqn_atari_envpool.py": [
        "--num-envs", 4, "--num-steps", 24, "--num-minibatches", 4, "--total-timesteps", 192, "--max-episode-steps", 30,
    ],
    "pqn_atari_envpool_lstm.py": [
        "--num-envs", 4, "--num-steps", 24, "--num-minibatches", 2, "--total-timesteps", 192, "--max-episode-steps", 30,
    ],
    "ppo_procgen.py": [
        "--total-timesteps", 64, "--num-envs", 2, "--num-steps", 16, "--num-minibatches", 2, "--update-epochs", 1,
        "--max-episode-steps", 10,
    ],
    "ppg_procgen.py": [
        "--total-timesteps", 64, "--num-envs", 2, "--num-steps", 16, "--num-minibatches", 2, "--n-iteration", 2,
        "--num-aux-rollouts", 2, "--e-auxiliary", 2, "--max-episode-steps", 10,
    ],
    "ppo_atari_multigpu.py": ["--total-timesteps", 128, "--local-num-envs", 2, "--num-steps", 32, "--update-epochs", 1],
    # two iterations of 4 envs x 32 steps on the proof-of-memory task, a small transformer with a sliding window
    "ppo_trxl.py": [
        "--env-id", "ProofofMemory-v0", "--total-timesteps", 256, "--num-envs", 4, "--num-steps", 32,
        "--num-minibatches", 2, "--update-epochs", 1, "--trxl-num-layers", 1, "--trxl-dim", 32, "--trxl-num-heads", 2,
        "--trxl-memory-length", 8,
    ],
    "ppo_atari_envpool.py": [
        "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1, "--max-episode-steps", 40,
    ],
    "ppo_pettingzoo_ma_atari.py": [
        "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1, "--max-cycles", 128,
    ],
    # two iterations of 8 envs x 8 steps of CartpoleBalance cut at 10 steps (JAX on the CPU)
    "ppo_continuous_action_playground.py": [
        "--total-timesteps", 128, "--num-envs", 8, "--num-steps", 8, "--episode-length", 10,
    ],
}  # fmt: skip

# The JAX twins (issue 8) run with their torch twin's budget; like the variants, each test file runs its own default
# and copied-file runs, so they are not in TINY. QDagger's JAX twin takes QDAGGER_TINY and a JAX teacher.
JAX_TWINS = {
    "dqn_jax.py": "dqn.py",
    "c51_jax.py": "c51.py",
    "dqn_atari_jax.py": "dqn_atari.py",
    "c51_atari_jax.py": "c51_atari.py",
    "ddpg_continuous_action_jax.py": "ddpg_continuous_action.py",
    "td3_continuous_action_jax.py": "td3_continuous_action.py",
    "sac_continuous_action_jax.py": "sac_continuous_action.py",
    "ppo_atari_envpool_xla_jax.py": "ppo_atari_envpool.py",
    "ppo_atari_envpool_xla_jax_scan.py": "ppo_atari_envpool.py",
}
JAX_TINY = {jax: (TINY | VARIANT_TINY)[twin] for jax, twin in JAX_TWINS.items()}
