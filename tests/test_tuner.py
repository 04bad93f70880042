"""cleanrl_utils.tuner: exact scores (normalised, aggregated, reported per seed) and pruning, failures and
resuming with a stand-in script (tests/fake_trainer.py); refusals of the command line; one tiny study of
cleanrl/ppo.py on CartPole-v1 + Acrobot-v1 end to end."""

import io
import re
import shlex
import subprocess
import sys

import optuna
import pytest
import tyro
from optuna.trial import TrialState

from cleanrl_utils.report import read_scalars
from cleanrl_utils.tuner import (
    Args,
    ParamSpec,
    Tuner,
    main,
    normalise,
    param_flags,
    params_fn_from,
    parse_param,
    parse_target_scores,
    seeded_per_trial,
    trial_exp_name,
)
from conftest import REPO, check_ok, script_env

FAKE = REPO / "tests" / "fake_trainer.py"
optuna.logging.set_verbosity(optuna.logging.WARNING)


def fake_command(*flags):
    return shlex.join([sys.executable, str(FAKE), *map(str, flags)])


def enqueued_study(storage, name, *params):
    """A study in `storage` whose first trials take `params`, in order (the tuner then loads it)."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    for p in params:
        study.enqueue_trial(p)
    return study


def test_specs_flags_and_names():
    assert parse_param("learning-rate=loguniform:0.0003,0.003") == ParamSpec("learning-rate", "loguniform", 0.0003, 0.003)
    assert parse_param("ent-coef=float:0,0.02") == ParamSpec("ent-coef", "float", 0.0, 0.02)
    assert parse_param("update-epochs=int:1,9,2") == ParamSpec("update-epochs", "int", 1, 9, 2)
    assert parse_param("x=categorical:2,2.5,true,adam").choices == (2, 2.5, True, "adam")
    assert parse_target_scores(["CartPole-v1=0,500", "Acrobot-v1=-500,0", "Raw-v0"]) == {
        "CartPole-v1": (0.0, 500.0),
        "Acrobot-v1": (-500.0, 0.0),
        "Raw-v0": None,
    }
    assert normalise(-400.0, (-500.0, 0.0)) == pytest.approx(0.2) and normalise(7.0, None) == 7.0
    flags = param_flags({"learning-rate": 0.001, "anneal-lr": False, "norm-adv": True, "ent-coef": -0.5})
    assert flags == ["--learning-rate=0.001", "--no-anneal-lr", "--norm-adv", "--ent-coef=-0.5"]
    assert trial_exp_name("ppo classic__x/y", 3) == "ppo-classic_x-y-trial3"
    # CleanRL's script="cleanrl/ppo.py": a first word ending in .py runs with this Python
    assert Tuner(f"{FAKE} --points 3", {"A-v0": None}, lambda t: {}).words == [sys.executable, str(FAKE), "--points", "3"]


def test_scores_are_normalised_aggregated_and_reported_per_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"
    enqueued_study(storage, "fake", {"x": 1.0})
    out = io.StringIO()
    tuner = Tuner(
        fake_command(),
        {"A-v0": (0, 100), "B-v0": (-100, 0)},
        lambda trial: {"x": trial.suggest_float("x", 0, 1)},
        metric_last_n_average_window=3,
        storage=storage,
        study_name="fake",
        out=out,
    )
    trial = tuner.tune(num_trials=1, num_seeds=2).trials[0]
    # last 3 of 5 points: A-v0 10 + seed + 3, B-v0 20 + 3 seed + 3 - 100
    assert trial.user_attrs["scores"] == {"A-v0": [14.0, 15.0], "B-v0": [-74.0, -71.0]}
    assert trial.user_attrs["seed_scores"] == pytest.approx([(0.14 + 0.26) / 2, (0.15 + 0.29) / 2])
    assert trial.intermediate_values == pytest.approx({0: 0.20, 1: 0.21})  # the mean over the seeds so far
    assert trial.state == TrialState.COMPLETE and trial.value == pytest.approx(0.21)
    assert trial.user_attrs["flags"] == ["--x=1.0"] and trial.user_attrs["exp_name"] == "fake-trial0"
    logs = sorted(p.name for p in (tmp_path / "tuner_logs" / "fake-trial0").iterdir())
    assert logs == ["A-v0__1.log", "A-v0__2.log", "B-v0__1.log", "B-v0__2.log"]
    runs = sorted(p.name.rsplit("__", 1)[0] for p in (tmp_path / "runs").iterdir())
    assert runs == ["A-v0__fake-trial0__1", "A-v0__fake-trial0__2", "B-v0__fake-trial0__1", "B-v0__fake-trial0__2"]
    lines = out.getvalue()
    assert "trial 0: B-v0 seed 2: charts/episodic_return -71.00, normalised 0.2900" in lines
    assert "tuner.db: 0 finished trials so far; 1 more trial to run, each 2 seeds x 2 envs; logs in tuner_logs/" in lines
    assert "trial 0: seed 1: average score 0.2000; mean of 1 seed 0.2000" in lines
    assert "trial 0: seed 2: average score 0.2200; mean of 2 seeds 0.2100" in lines
    assert "1 trial run: 1 complete, 0 pruned, 0 failed; 1 finished in the study" in lines
    assert "best trial 0: value 0.2100 (maximize); parameters {'x': 1.0}" in lines
    assert f"  {fake_command('--x=1.0')}" in lines


def test_median_pruner_stops_a_worse_trial_after_its_first_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"
    enqueued_study(storage, "prune", {"x": 1.0}, {"x": 0.0})
    out = io.StringIO()
    tuner = Tuner(
        fake_command(),
        {"A-v0": None},  # raw scores
        lambda trial: {"x": trial.suggest_float("x", 0, 1)},
        metric_last_n_average_window=10,  # more than the 5 points: the mean of all, 10 x + seed + 2
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1),
        storage=storage,
        study_name="prune",
        out=out,
    )
    good, bad = tuner.tune(num_trials=2, num_seeds=2).trials
    assert good.state == TrialState.COMPLETE and good.intermediate_values == {0: 13.0, 1: 13.5} and good.value == 13.5
    assert bad.state == TrialState.PRUNED and bad.intermediate_values == {0: 3.0}
    assert sorted(p.name for p in (tmp_path / "tuner_logs" / "prune-trial1").iterdir()) == ["A-v0__1.log"]
    assert "trial 1: pruned after seed 1" in out.getvalue()
    assert "2 trials run: 1 complete, 1 pruned, 0 failed; 2 finished in the study" in out.getvalue()


def test_a_failed_run_fails_its_trial_and_the_study_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"
    enqueued_study(storage, "fail", {"crash": True, "points": 5}, {"crash": False, "points": 0}, {"crash": False, "points": 5})
    out = io.StringIO()
    tuner = Tuner(
        fake_command(),
        {"A-v0": (0, 100), "B-v0": (-100, 0)},
        lambda t: {"crash": t.suggest_categorical("crash", [True, False]), "points": t.suggest_categorical("points", [0, 5])},
        storage=storage,
        study_name="fail",
        out=out,
    )
    crashed, silent, fine = tuner.tune(num_trials=3, num_seeds=1).trials
    log = "tuner_logs/fail-trial0/A-v0__1.log"
    assert crashed.state == TrialState.FAIL
    assert crashed.user_attrs["failed_run"] == {"env_id": "A-v0", "seed": 1, "reason": "exit 3", "exit_code": 3, "log": log}
    assert "diverged" in (tmp_path / log).read_text()
    assert sorted(p.name for p in (tmp_path / "tuner_logs" / "fail-trial0").iterdir()) == ["A-v0__1.log"]  # B-v0 skipped
    assert silent.state == TrialState.FAIL
    assert "logged no charts/episodic_return in runs/A-v0__fail-trial1__1__" in silent.user_attrs["failed_run"]["reason"]
    assert fine.state == TrialState.COMPLETE
    assert f"  trial 0 failed: A-v0 seed 1: exit 3; log {log}" in out.getvalue()
    assert "3 trials run: 1 complete, 0 pruned, 2 failed" in out.getvalue()


def test_failed_trials_in_a_row_stop_the_tuner_with_exit_1(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    flags = ["--command", fake_command("--crash"), "--target-scores", "A-v0=0,100", "--params", "x=float:0,1"]
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=[*flags, "--num-trials", "5", "--max-consecutive-failures", "2"]))
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("tuner: stopped after 2 failed trials in a row; the last: A-v0 seed 1: exit 3; log ")
    study = optuna.load_study(storage="sqlite:///tuner.db", study_name="tuner")
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.FAIL]
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=[*flags, "--num-trials", "5", "--max-consecutive-failures", "1"]))
    captured = capsys.readouterr()
    assert "2 finished trials so far; 5 more trials to run, each 3 seeds x 1 env;" in captured.out
    lines = captured.err.strip().splitlines()
    assert exit_info.value.code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("tuner: stopped after a failed trial; the last: A-v0 seed 1: exit 3; log ")


def test_running_again_adds_trials_to_the_stored_study(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"

    def tuner(**changes):
        settings = dict(
            command=fake_command(),
            target_scores={"A-v0": (0, 100)},
            params_fn=lambda t: {"x": t.suggest_float("x", 0, 1)},
            storage=storage,
            study_name="resume",
            out=io.StringIO(),
        )
        return Tuner(**(settings | changes))

    tuner().tune(num_trials=1, num_seeds=1)
    study = tuner().tune(num_trials=1, num_seeds=1)
    assert [(t.number, t.state) for t in study.trials] == [(0, TrialState.COMPLETE), (1, TrialState.COMPLETE)]
    assert len(list((tmp_path / "runs").glob("A-v0__resume-trial1__1__*"))) == 1
    # values made with other settings would not compare: refused before any run
    for changes, tune_args, message in [
        ({"target_scores": {"A-v0": (0, 50)}}, {}, "was tuned with target_scores {'A-v0': [0.0, 100.0]}, not"),
        ({}, {"num_seeds": 2}, "was tuned with num_seeds 1, not 2"),
        ({"metric_last_n_average_window": 5}, {}, "was tuned with metric_last_n_average_window 50, not 5"),
        ({"direction": "minimize"}, {}, "is to maximize, not minimize"),
        ({"load_if_exists": False}, {}, "the study 'resume' already exists"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            tuner(**changes).tune(num_trials=1, **{"num_seeds": 1, **tune_args})
    assert len(optuna.load_study(storage=storage, study_name="resume").trials) == 2


def test_a_seeded_study_resumed_goes_on_with_new_draws_that_repeat(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def tune(study_name, num_trials):
        flags = ["--command", fake_command(), "--target-scores", "A-v0=0,100", "--params", "x=float:0,1"]
        flags += ["--num-seeds", "1", "--sampler-seed", "1", "--study-name", study_name, "--num-trials", str(num_trials)]
        main(tyro.cli(Args, args=flags))
        return [t.params["x"] for t in optuna.load_study(storage="sqlite:///tuner.db", study_name=study_name).trials]

    tune("resumed", 2)
    resumed = tune("resumed", 1)  # a seeded sampler made anew used to draw trial 0's x again here
    assert len(set(resumed)) == 3, resumed
    assert tune("fresh", 3) == resumed  # the same seed, the same draws, however the trials were split


@pytest.mark.parametrize("kind", [optuna.samplers.TPESampler, optuna.samplers.RandomSampler])
def test_a_sampler_seeded_per_trial(kind):
    storage = optuna.storages.InMemoryStorage()

    def study(name, seed=1):
        sampler = seeded_per_trial(lambda s: kind(seed=s), seed)
        return optuna.create_study(storage=storage, study_name=name, sampler=sampler, load_if_exists=True)

    def draw(study):
        trial = study.ask()
        return trial, (trial.suggest_float("x", 0, 1), trial.suggest_categorical("c", list(range(100))))

    # two workers started at once on one study (each asks before either tells) draw distinct trials ...
    worker_a, worker_b = study("parallel"), study("parallel")
    (t0, first), (t1, second) = draw(worker_a), draw(worker_b)
    assert (t0.number, t1.number) == (0, 1) and first != second
    # ... the ones a single worker draws
    single = study("single")
    assert [draw(single)[1] for _ in range(2)] == [first, second]
    assert draw(study("other seed", seed=2))[1] != first


def test_resuming_with_another_search_space_is_refused_before_any_trial(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"

    def cli(*params):
        flags = ["--command", fake_command(), "--target-scores", "A-v0=0,100", "--num-seeds", "1", "--num-trials", "1"]
        try:
            main(tyro.cli(Args, args=[*flags, "--storage", storage, "--study-name", "space", "--params", *params]))
        except SystemExit as e:
            lines = capsys.readouterr().err.strip().splitlines()
            assert e.code == 2 and len(lines) == 1, lines
            return lines[0]

    def refused(message, *params):
        line = cli(*params)
        end = "; resume it with the same --params, or use another --study-name"
        assert line == f"tuner: the study 'space' in {storage} was made with another search space: {message}{end}", line

    def trials():
        return optuna.load_study(storage=storage, study_name="space").trials

    # a study begun from Python with a plain params_fn: checked against its trials' distributions
    params_fn = lambda t: {"x": t.suggest_float("x", 0, 1), "points": t.suggest_categorical("points", [5, 6])}  # noqa: E731
    Tuner(fake_command(), {"A-v0": (0, 100)}, params_fn, storage=storage, study_name="space", out=io.StringIO()).tune(1, 1)
    refused("x was float:0,1, not float:0,2", "x=float:0,2", "points=categorical:5,6")
    refused("points was categorical:5,6, not categorical:5,7", "x=float:0,1", "points=categorical:5,7")
    assert "search_space" not in optuna.load_study(storage=storage, study_name="space").user_attrs["tuner"]
    # the same specs, written otherwise and in another order: resumed, and now the study keeps them
    assert cli("points=categorical:5,6", "x=float:0.0,1.00") is None
    space = optuna.load_study(storage=storage, study_name="space").user_attrs["tuner"]["search_space"]
    assert space == {"points": "categorical:5,6", "x": "float:0,1"}
    for message, params in [
        ("x was float:0,1, not categorical:0,1", ["x=categorical:0,1", "points=categorical:5,6"]),
        ("x was float:0,1, not loguniform:0.1,1", ["x=loguniform:0.1,1", "points=categorical:5,6"]),
        ("x was float:0,1, not float:0,0.5", ["x=float:0,0.5", "points=categorical:5,6"]),  # Optuna allows it
        ("points was categorical:5,6, not int:5,6", ["x=float:0,1", "points=int:5,6"]),
        ("points (categorical:5,6) is left out now", ["x=float:0,1"]),
        (
            "it had no crash (categorical:true,false)",
            ["x=float:0,1", "points=categorical:5,6", "crash=categorical:true,false"],
        ),
    ]:
        refused(message, *params)
    assert [t.state for t in trials()] == [TrialState.COMPLETE, TrialState.COMPLETE]  # no trial began


def test_a_params_fn_that_draws_a_parameter_otherwise_fails_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'tuner.db'}"
    study = enqueued_study(storage, "fn")
    trial = study.ask()
    trial.suggest_float("x", 0, 1, log=False), trial.suggest_categorical("c", ["adam", "sgd"])
    study.tell(trial, 0.5)
    where = f"the study 'fn' in {storage} was made with another search space"
    for params_fn, message in [
        (lambda t: {"x": t.suggest_categorical("x", [0, 1])}, f"{where}: x was float:0,1, not categorical:0,1 (Optuna: "),
        (lambda t: {"x": t.suggest_float("x", 0.1, 1, log=True)}, f"{where}: x was float:0,1, not loguniform:0.1,1 "),
        (lambda t: {"c": t.suggest_categorical("c", ["adam"])}, f"{where}: c was categorical:adam,sgd, not categorical:adam "),
        (lambda t: {"y": t.suggest_float("y", 0, 1), "z": t.suggest_categorical("y", [0, 1])}, "params_fn: drawing y ("),
        (lambda t: {"y": t.suggest_float("y", 1, 0)}, "`low <= high` must hold"),  # not from a draw: Optuna's words
    ]:
        tuner = Tuner(fake_command(), {"A-v0": None}, params_fn, storage=storage, study_name="fn", out=io.StringIO())
        with pytest.raises(ValueError) as error:
            tuner.tune(num_trials=1, num_seeds=1)
        assert str(error.value).startswith(message), str(error.value)
        failed = optuna.load_study(storage=storage, study_name="fn").trials[-1]
        assert failed.state == TrialState.FAIL and failed.user_attrs == {"error": str(error.value)}
    assert not (tmp_path / "tuner_logs").exists() and not (tmp_path / "runs").exists()  # no run started


def test_the_worked_example_draws_what_the_docs_show():
    """docs/tools/tuner.md: benchmark/tune_ppo_classic_control.sh --sampler-seed 1 draws trials 0 to 3, and
    running it again draws trial 4 anew (TPE's random start: the draws do not depend on the returns)."""
    script = (REPO / "benchmark" / "tune_ppo_classic_control.sh").read_text()
    specs = re.search(r"--params (.*?) \\\n(.*?) \\\n", script).groups()
    params_fn = params_fn_from([parse_param(spec) for spec in " ".join(specs).split()])
    shown = dict(re.findall(r"^trial (\d+): (--learning-rate=.*)$", (REPO / "docs" / "tools" / "tuner.md").read_text(), re.M))
    assert sorted(map(int, shown)) == [0, 1, 2, 3, 4]
    study = optuna.create_study(
        direction="maximize", sampler=seeded_per_trial(lambda s: optuna.samplers.TPESampler(seed=s), 1)
    )
    for number in range(5):
        trial = study.ask()
        assert " ".join(param_flags(params_fn(trial))) == shown[str(number)], number
        study.tell(trial, 0.0)


def test_bad_command_lines_exit_2_with_one_line_and_create_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = {"--command": fake_command(), "--target-scores": ["A-v0=0,100"], "--params": ["x=float:0,1"]}
    cases = [
        ({"--params": ["x=normal:0,1"]}, "--params 'x=normal:0,1': unknown distribution 'normal'"),
        ({"--params": ["x=float:1,0"]}, "LOW 1 must be below HIGH 0"),
        ({"--params": ["x=loguniform:0,1"]}, "loguniform needs LOW > 0"),
        ({"--params": ["x=int:1,8,3"]}, "STEP 3 must be at least 1 and divide HIGH - LOW (7)"),
        ({"--params": ["x=int:1,2.5"]}, "int takes integers"),
        ({"--params": ["x=categorical:1"]}, "categorical takes two or more"),
        ({"--params": ["x=categorical:1,1.0"]}, "categorical values must differ"),
        ({"--params": ["x"]}, "must be NAME=KIND:VALUES"),
        ({"--params": ["learning rate=float:0,1"]}, "'learning rate' is not a flag name"),
        ({"--params": ["seed=int:1,3"]}, "the tuner sets --seed itself"),
        ({"--params": ["x=float:0,1", "x=float:0,2"]}, "--params names x twice"),
        ({"--target-scores": ["A-v0=100,0"]}, "the target scores of A-v0: min 100 must be below max 0"),
        ({"--target-scores": ["A-v0=0"]}, "MIN,MAX must be two numbers"),
        ({"--target-scores": ["A-v0=0,nan"]}, "must be finite"),
        ({"--target-scores": ["A-v0=0,1", "A-v0=0,2"]}, "names A-v0 twice"),
        ({"--command": "python 'unclosed"}, "does not split into words"),
        ({"--command": fake_command("--seed", 3)}, "--command sets --seed; the tuner sets it"),
        ({"--command": fake_command("--x", 1)}, "--x is both in --command and in --params"),
        ({"--command": "no-such-program-xyz --a"}, "cannot find the program 'no-such-program-xyz'"),
        ({"--command": "missing.py"}, "no such script 'missing.py'"),
        ({"--num-seeds": "0"}, "--num-seeds must be at least 1"),
        ({"--num-trials": "0"}, "--num-trials must be at least 1"),
        ({"--metric-last-n-average-window": "0"}, "--metric-last-n-average-window must be at least 1"),
        ({"--sampler-seed": "-1"}, "--sampler-seed must be at least 0, got -1"),
        ({"--storage": "tuner.db"}, "must be a database URL such as sqlite:///tuner.db"),
        ({"--storage": "sqlite://"}, "keeps the study in memory"),
        ({"--storage": "sqlite:///no/such/folder/t.db"}, "does not exist"),
        ({"--storage": "nope://x"}, "--storage 'nope://x': SQLAlchemy knows no database 'nope'"),
        ({"--storage": "sqlite+nope:///t.db"}, "SQLAlchemy knows no database 'sqlite+nope'"),
        ({"--storage": "sqlite:/t.db"}, "must be a database URL such as sqlite:///tuner.db"),
        ({"--storage": "sqlite:///:memory:"}, "keeps the study in memory"),
        ({"--storage": "sqlite://t.db"}, "an SQLite file follows three slashes, sqlite:///tuner.db"),
        ({"--storage": "sqlite:////"}, "names a folder"),
        ({"--storage": "mysql+nosuchdriver://u@localhost/db"}, "SQLAlchemy knows no database 'mysql+nosuchdriver'"),
    ]
    for change, message in cases:
        flags = base | change
        argv = [word for flag, value in flags.items() for word in [flag, *(value if isinstance(value, list) else [value])]]
        with pytest.raises(SystemExit) as exit_info:
            main(tyro.cli(Args, args=argv))
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2, (change, lines)
        assert len(lines) == 1 and lines[0].startswith("tuner: ") and message in lines[0], (change, lines)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("driver", ["mysql+pymysql", "mysql+mysqldb", "postgresql+psycopg2"])
def test_a_storage_whose_driver_is_missing_exits_2(tmp_path, monkeypatch, capsys, driver):
    monkeypatch.chdir(tmp_path)
    flags = ["--command", fake_command(), "--target-scores", "A-v0=0,100", "--params", "x=float:0,1"]
    module = {"mysql+pymysql": "pymysql", "mysql+mysqldb": "MySQLdb", "postgresql+psycopg2": "psycopg2"}[driver]
    monkeypatch.setitem(sys.modules, module, None)  # not installed, whether it is here or not
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=[*flags, "--storage", f"{driver}://u@localhost/db"]))
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"tuner: --storage '{driver}://u@localhost/db': the driver of {driver} is not installed")
    assert list(tmp_path.iterdir()) == []


def test_a_storage_that_cannot_open_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    flags = ["--command", fake_command(), "--target-scores", "A-v0=0,100", "--params", "x=float:0,1"]
    (tmp_path / "tuner.db").write_text("not a database")  # a URL that is fine, a file that is not
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=flags))
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("tuner: cannot open --storage 'sqlite:///tuner.db': ") and "not a database" in lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["tuner.db"]


def test_tiny_ppo_study_on_two_envs(tmp_path):
    ppo = shlex.join([sys.executable, str(REPO / "cleanrl" / "ppo.py")])
    command = f"{ppo} --no-cuda --total-timesteps 1024 --num-envs 2 --num-steps 128"  # 512 steps: an Acrobot episode
    flags = ["--command", command, "--target-scores", "CartPole-v1=0,500", "Acrobot-v1=-500,0"]
    flags += ["--params", "learning-rate=loguniform:0.0003,0.003", "num-minibatches=categorical:1,2,4"]
    flags += ["--num-trials", "2", "--num-seeds", "1", "--sampler-seed", "1", "--study-name", "ppo-tiny"]
    env = script_env() | {"PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.tuner", *flags], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    check_ok(result)
    study = optuna.load_study(storage=f"sqlite:///{tmp_path / 'tuner.db'}", study_name="ppo-tiny")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    for trial in study.trials:
        scores = {}
        for env_id in ("CartPole-v1", "Acrobot-v1"):
            (run_dir,) = (tmp_path / "runs").glob(f"{env_id}__ppo-tiny-trial{trial.number}__1__*")
            _, returns = read_scalars(str(run_dir), "charts/episodic_return")
            scores[env_id] = [float(returns[-50:].mean())]
        assert trial.user_attrs["scores"] == scores
        cartpole, acrobot = scores["CartPole-v1"][0] / 500, (scores["Acrobot-v1"][0] + 500) / 500
        assert trial.value == pytest.approx((cartpole + acrobot) / 2)
    best = study.best_trial
    assert f"best trial {best.number}: value {best.value:.4f} (maximize)" in result.stdout
    assert f"--learning-rate={best.params['learning-rate']}" in result.stdout.splitlines()[-1]


def test_cleanrl_s_documented_form_runs_with_a_wandb_run_per_trial(tmp_path, monkeypatch):
    # CleanRL's docs: Tuner(script=..., metric=..., target_scores={env: [min, max]}, params_fn with fixed values,
    # pruner, sampler, wandb_kwargs), then tune(num_trials=..., num_seeds=...)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tuner = Tuner(
        script=str(FAKE),
        metric="charts/episodic_return",
        metric_last_n_average_window=50,
        direction="maximize",
        aggregation_type="average",
        target_scores={"A-v0": [0, 100], "B-v0": [-100, 0]},
        params_fn=lambda trial: {"x": trial.suggest_float("x", 0, 1), "points": 5},
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5),
        sampler=optuna.samplers.TPESampler(seed=1),
        wandb_kwargs={"project": "cleanrl-tuner-test"},
        out=io.StringIO(),
    )
    assert tuner.words == [sys.executable, str(FAKE)] and tuner.study_name.startswith("tuner_")  # "" is a new study
    study = tuner.tune(num_trials=2, num_seeds=1)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 2  # one W&B run per trial
    for run in runs:  # the offline run's record holds the logged keys and the trial's parameters
        record = next(run.glob("*.wandb")).read_bytes()
        assert all(key in record for key in (b"aggregated_normalized_score", b"A-v0_return", b"B-v0_return", b"points"))


def test_command_and_script_are_one_argument():
    with pytest.raises(ValueError, match="not both"):
        Tuner(fake_command(), {"A-v0": None}, lambda t: {}, script=str(FAKE))
    with pytest.raises(ValueError, match="command= or as script="):
        Tuner(target_scores={"A-v0": None}, params_fn=lambda t: {})


@pytest.mark.parametrize("one_thread, preset, expected", [(True, None, "1"), (False, None, "None"), (True, "3", "3")])
def test_each_run_gets_one_thread_unless_the_user_chose(tmp_path, monkeypatch, one_thread, preset, expected):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    if preset is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", preset)
    tuner = Tuner(fake_command(), {"A-v0": None}, lambda t: {}, storage=None, one_thread=one_thread, out=io.StringIO())
    tuner.tune(num_trials=1, num_seeds=1)
    log = (tmp_path / "tuner_logs" / f"{tuner.study_name}-trial0" / "A-v0__1.log").read_text()
    assert f"OMP_NUM_THREADS={expected} " in log
    assert ("xla_cpu_multi_thread_eigen=false" in log) == (expected == "1")


def test_a_wandb_run_that_cannot_start_is_one_line(tmp_path, monkeypatch):
    import wandb

    def no_login(**kwargs):
        raise wandb.errors.UsageError("api_key not configured (no-tty). call wandb.login(key=[your_api_key])")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(wandb, "init", no_login)
    tuner = Tuner(script=str(FAKE), target_scores={"A-v0": None}, params_fn=lambda t: {}, storage=None,
                  wandb_kwargs={"project": "p"}, out=io.StringIO())  # fmt: skip
    with pytest.raises(ValueError, match=r"^wandb_kwargs: W&B cannot start the trial's run \(api_key not configured"):
        tuner.tune(num_trials=1, num_seeds=1)
