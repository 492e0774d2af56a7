"""The validator's ordered checks and verdicts, its event payload, and `spade-engine validate`."""

from __future__ import annotations

import json
import textwrap

import pytest
from sandbox_support import ENVS, REDTEAM, example_sources, fast_config, wait_no_sandbox_processes
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.events import EnvironmentValidated, decode_envelope, encode_envelope, make_envelope
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.validator import CHECK_NAMES, ErrorKind, Validator

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def cfg():
    return fast_config(uid_base=2_000_000_060)


@pytest.fixture(scope="module")
def pool(cfg):
    p = SandboxPool(cfg)
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == []


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool, turn_limit=8)


def _env(body: str, name: str = "TestEnv") -> str:
    return textwrap.dedent(body).replace("TestEnv", name)


SOLVABLE = '''
import random
class TestEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\\\boxed{n}." % self.n, {}
    def step(self, action):
        ok = action.strip() == "\\\\boxed{%d}" % self.n
        return "ok" if ok else "no", (1.0 if ok else 0.0), True, False, {}
    def solution(self):
        return ["\\\\boxed{%d}" % self.n]
'''


@pytest.mark.parametrize("name", sorted(example_sources()))
def test_every_example_environment_is_valid(validator, name):
    report = validator.validate(example_sources()[name])
    assert report.valid, (report.failed_check, report.detail)
    assert report.error_kind is None and report.failed_check is None
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    assert all(c.passed and c.seconds >= 0 for c in report.checks)
    assert report.contract == ("gymnasium" if name == "gym_parity_env.py" else "spade")
    assert report.has_solution
    assert report.solution_actions and all(a.startswith("\\boxed{") for a in report.solution_actions)
    assert report.sandbox_layers == report.sandbox_layers | {"audit_hook": True}


def test_text_solution_is_replayed_from_its_boxed_answer(validator):
    report = validator.validate((ENVS / "unscramble_env.py").read_text())
    assert report.valid
    replay = next(c for c in report.checks if c.name == "replay")  # replayed in a fresh task
    assert "solved in 1 step" in replay.detail


@pytest.mark.parametrize(
    ("source", "kind", "check", "detail"),
    [
        ("class BrokenEnv:\n    def reset(self, seed=None:\n", "syntax", "parse", "line 2"),
        ("x = 1\nclass Helper:\n    pass\n", "contract", "env_class", "no environment class"),
        (_env(SOLVABLE) + _env(SOLVABLE, "OtherEnv"), "contract", "env_class", "more than one"),
        ("import subprocess\n" + _env(SOLVABLE), "forbidden", "static_screen", "import subprocess"),
        (_env(SOLVABLE).replace("random.Random(seed).randint(1, 9)", "random.randint(1, 10**9)"), "nondeterministic", "determinism", "different observation"),
        (_env(SOLVABLE).replace('return ["\\\\boxed{%d}" % self.n]', 'return ["\\\\boxed{%d}" % (self.n + 1)]'), "unsolvable", "replay", "not success"),
        (_env(SOLVABLE).replace('ok = action.strip() == "\\\\boxed{%d}" % self.n', "ok = True"), "trivial", "not_trivial", "wins"),
        (_env(SOLVABLE).replace("class TestEnv:", "class TestEnv:\n    def __init__(self, size):\n        self.size = size"), "crash", "import", "size"),
        (_env(SOLVABLE).replace("def reset(self, seed=None):", "def reset(self):"), "crash", "reset", "seed"),
        (_env(SOLVABLE).replace(", {}\n    def solution", ", []\n    def solution"), "contract", "step", "info must be a dict"),
    ],
    ids=["syntax", "no-class", "two-classes", "forbidden-import", "nondeterministic", "unsolvable", "trivial", "ctor-args", "reset-no-seed", "info-not-dict"],
)
def test_failures_name_the_check_and_the_error_kind(validator, source, kind, check, detail):
    report = validator.validate(source)
    assert not report.valid
    assert report.error_kind == kind and ErrorKind(kind)
    assert report.failed_check == check
    assert detail in report.detail
    assert report.checks[-1].name == check and not report.checks[-1].passed
    assert all(c.passed for c in report.checks[:-1])


def test_gymnasium_env_with_non_text_spaces_fails_the_contract(validator):
    src = textwrap.dedent(
        """
        import gymnasium as gym
        class BoxyEnv(gym.Env):
            def __init__(self):
                self.observation_space = gym.spaces.Discrete(2)
                self.action_space = gym.spaces.Discrete(2)
            def reset(self, *, seed=None, options=None):
                return 0, {}
            def step(self, action):
                return 0, 0.0, True, False, {}
        """
    )
    report = validator.validate(src)
    assert (report.error_kind, report.failed_check) == ("contract", "import")
    assert "Text" in report.detail


THREE_STEPS = '''
class ThreeStepEnv:
    def reset(self, seed=None):
        self.i = 0
        return "Say \\\\boxed{a}, then \\\\boxed{b}, then \\\\boxed{c}.", {}
    def step(self, action):
        if action != "\\\\boxed{" + "abc"[self.i] + "}":
            return "wrong", 0.0, True, False, {}
        self.i += 1
        return "good", (1.0 if self.i == 3 else 0.0), self.i == 3, False, {}
    def solution(self):
        return ["\\\\boxed{a}", "\\\\boxed{b}", "\\\\boxed{c}"]
'''


def test_solution_longer_than_the_turn_limit_is_unsolvable(pool):
    assert Validator(pool, turn_limit=3).validate(THREE_STEPS).valid
    report = Validator(pool, turn_limit=2).validate(THREE_STEPS)
    assert (report.error_kind, report.failed_check) == ("unsolvable", "solution")
    assert "turn limit is 2" in report.detail


def test_report_is_the_payload_of_environment_validated(validator):
    report = validator.validate((ENVS / "arithmetic_env.py").read_text())
    payload = EnvironmentValidated(env_id="env-1", **report.payload_fields())
    env = make_envelope(payload, run_id="run-1", producer="validator")
    back = decode_envelope(encode_envelope(env))
    assert back.payload["valid"] is True and back.payload["class_name"] == "ArithmeticEnv"
    assert [c["name"] for c in back.payload["checks"]] == list(CHECK_NAMES)
    assert back.payload["sandbox_layers"] == report.sandbox_layers
    bad = validator.validate("def nope(:")
    payload = EnvironmentValidated(env_id="env-2", **bad.payload_fields())
    assert payload.error_kind == "syntax" and payload.failed_check == "parse" and not payload.valid


def test_validator_is_thread_safe(validator):
    from concurrent.futures import ThreadPoolExecutor

    sources = list(example_sources().values()) * 2
    with ThreadPoolExecutor(4) as ex:
        reports = list(ex.map(validator.validate, sources))
    assert all(r.valid for r in reports)


# ----------------------------------------------------------------------------------------------
# spade-engine validate


@pytest.fixture()
def toml(tmp_path):
    p = tmp_path / "spade.toml"
    p.write_text(
        "[sandbox]\nworkers = 2\nstep_timeout_s = 2.0\nimport_timeout_s = 4.0\nvalidate_timeout_s = 20.0\n"
        "memory_mb = 384\ncpu_s = 8\nuid_base = 2000000070\n"
    )
    return p


def test_cli_validates_files_and_one_hostile_file_stops_nothing(toml):
    files = [ENVS / "arithmetic_env.py", REDTEAM / "infinite_loop.py", REDTEAM / "kill_group.py", ENVS / "gym_parity_env.py"]
    result = CliRunner().invoke(app, ["validate", *map(str, files), "--json", "-c", str(toml)])
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["path"] for line in lines] == [str(f) for f in files]
    verdicts = {line["path"].rsplit("/", 1)[1]: (line["valid"], line["error_kind"]) for line in lines}
    assert verdicts == {
        "arithmetic_env.py": (True, None),
        "infinite_loop.py": (False, "timeout"),
        "kill_group.py": (False, "forbidden"),
        "gym_parity_env.py": (True, None),
    }
    for line in lines:
        assert isinstance(line["checks"], list) and {"name", "passed", "detail", "seconds"} <= set(line["checks"][0])
    assert wait_no_sandbox_processes(fast_config(uid_base=2000000070)) == []


def test_cli_exit_zero_when_all_valid_and_two_on_bad_input(toml, tmp_path):
    ok = CliRunner().invoke(app, ["validate", str(ENVS), "-c", str(toml), "-v"])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.count("valid ") == len(list(ENVS.glob("*.py")))
    assert "not_trivial" in ok.stdout  # --verbose lists the checks
    missing = CliRunner().invoke(app, ["validate", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "no such file" in " ".join(missing.output.split())
    assert CliRunner().invoke(app, ["validate", "--help"]).exit_code == 0


def test_whole_validation_has_a_wall_clock_limit(pool):
    slow = _env(SOLVABLE).replace("    def step(self, action):\n", "    def step(self, action):\n        import time; time.sleep(0.3)\n")
    v = Validator(pool, turn_limit=8)
    v.validate_timeout_s = 1.5  # every step is within the step limit, the validation is not
    report = v.validate(slow)
    assert (report.valid, report.error_kind) == (False, "timeout")
    assert "validation exceeded its 1.5s wall-clock limit" in report.detail


def test_preloaded_modules_are_usable_where_importing_them_would_be_forbidden():
    pytest.importorskip("sympy")  # a torch dependency; it imports ctypes, which tasks may not
    src = _env(SOLVABLE).replace("import random", "import random\nimport sympy")
    cfg = fast_config(workers=1, uid_base=2_000_000_065, memory_mb=1024)
    with SandboxPool(cfg) as plain:
        assert Validator(plain).validate(src).error_kind == "forbidden"
    with SandboxPool(cfg.model_copy(update={"preload_modules": ["sympy"]})) as preloaded:
        assert Validator(preloaded).validate(src).valid
    assert wait_no_sandbox_processes(cfg) == []


def test_a_crash_detail_quotes_the_line_of_the_environment_that_failed(validator) -> None:
    # what a repair shows the designer: the exception, then where in its own code it happened
    src = SOLVABLE.replace(
        "        self.n = random.Random(seed).randint(1, 9)\n",
        "        self.n = random.Random(seed).randint(1, 9)\n        self.items = self.CATALOGUE[self.n]\n",
    )
    report = validator.validate(src)
    assert not report.valid and report.failed_check == "reset" and report.error_kind == "crash"
    assert "AttributeError" in report.detail and "'CATALOGUE'" in report.detail
    assert "(line 6 in reset: self.items = self.CATALOGUE[self.n])" in report.detail, report.detail


def test_where_in_environment_reads_only_the_environment_frames() -> None:
    from spade_engine.sandbox.pool import where_in_environment

    trace = (
        'Traceback (most recent call last):\n  File "/x/worker.py", line 10, in op_reset\n    obs = env.reset()\n'
        '  File "<environment>", line 7, in reset\n    self._draw(rng)\n'
        '  File "<environment>", line 12, in _draw\n    x = 1 / 0\nZeroDivisionError: division by zero\n'
    )
    assert where_in_environment(trace) == " (line 12 in _draw: x = 1 / 0)"
    assert where_in_environment("") == "" and where_in_environment('File "/x.py", line 1, in f\n    y') == ""
    long = 'File "<environment>", line 3, in step\n    ' + "z" * 500
    assert where_in_environment(long).endswith("z...)") and len(where_in_environment(long)) < 220
