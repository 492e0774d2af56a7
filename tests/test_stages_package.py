"""The stages as a package (issue 33): the names callers import, the stage and role names, the
designer format recorded on EnvironmentProposed (v2) and read back by repairs, and the clear error
of a stage that needs a sandbox the context does not have. With the procedural policy: no model,
no sandbox."""

from __future__ import annotations

import importlib
import pkgutil

import msgspec
import pytest

from spade_engine.config import load_config
from spade_engine.engine import pipeline, stages
from spade_engine.engine.corpus import bundled_corpus
from spade_engine.engine.designer_formats import FORMATS
from spade_engine.engine.seed_archive import SeedEnv
from spade_engine.engine.stages import StageName, WorkerRole
from spade_engine.engine.state import EnvState, RunState
from spade_engine.events.catalogue import EnvironmentProposed, Generation
from spade_engine.events.codec import make_envelope
from spade_engine.policy.registry import make_policy

#: the names the engine, the CLI, the benchmarks and the tests import from the stages
CALLERS_IMPORT = (
    "StageContext", "DesignJob", "NOMINAL_DIFFICULTIES", "choose_skill", "derive_seed", "env_key", "seed_env_id",
    "propose", "propose_batch", "propose_repair", "design_job", "repair_job", "seed_proposal", "prompt_builder",
    "designer_batch", "validate", "validate_batch", "validation_seed", "code_lines", "copied_share", "write_hint",
    "play", "play_specs", "estimate_regret",
)


def _ctx(fmt: str = "standalone", **kw) -> stages.StageContext:
    cfg = load_config(overrides={"loop.designer_format": fmt, "seed": 5})
    return stages.StageContext(run_id="run-x-abcdef", cfg=cfg, policy=make_policy(cfg.policy), corpus=bundled_corpus(), **kw)


def _truncated(proposed: EnvironmentProposed, **changes) -> EnvironmentProposed:
    """``proposed`` as if the token limit had cut it (rejected before any sandbox)."""
    cut = Generation(completion_token_ids=[1] * 9, logprobs=[0.0] * 9, finish_reason="length")
    return msgspec.structs.replace(proposed, generation=cut, **changes)


def test_every_name_callers_import_is_in_the_package_and_each_module_says_what_it_owns():
    for name in (*CALLERS_IMPORT, *stages.__all__):
        assert getattr(stages, name) is not None, name
    assert set(CALLERS_IMPORT) <= set(stages.__all__)
    modules = [m.name for m in pkgutil.iter_modules(stages.__path__)]
    assert {"context", "design", "validate", "novelty_copies", "hint", "play", "regret"} <= set(modules)
    for name in modules:
        doc = importlib.import_module(f"spade_engine.engine.stages.{name}").__doc__
        assert doc and len(doc.strip()) > 40, name


def test_stage_and_role_names_are_the_strings_they_were():
    assert [str(s) for s in StageName] == ["validate", "repair", "hint", "play", "regret", "round", "replay"]
    assert set(pipeline.STAGES) == {"validate", "repair", "hint", "play", "regret", "round", "replay"}
    assert pipeline.STAGES["play"] is pipeline.STAGES[StageName.PLAY]
    assert {str(s.role) for s in pipeline.STAGES.values()} == {"designer", "validator", "rollout", "regret"}
    assert pipeline.role_inputs("rollout") == pipeline.role_inputs(WorkerRole.ROLLOUT)
    assert f"spade.run.{WorkerRole.ROLLOUT}" == "spade.run.rollout"
    # recorded as the plain string
    assert msgspec.json.encode({"role": WorkerRole.REGRET}) == b'{"role":"regret"}'
    proposed = EnvironmentProposed(env_id="abcdef-e00000", skill="s", difficulty=0.5, code="x", code_sha256="0", policy_version="v0")
    with pytest.raises(ValueError, match="unknown stage 'bogus'"):
        pipeline.run_stage(_ctx(), RunState(run_id="run-x-abcdef"), EnvState(env_id=proposed.env_id, proposed=proposed),
                           "bogus", lambda payload, cause: None)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_proposal_records_its_designer_format_and_its_repair_follows_it(fmt: str):
    ctx = _ctx(fmt)
    job = stages.design_job(ctx, env_id="abcdef-e00000", index=0, skill_history=lambda s: [])
    (proposed,) = stages.propose_batch(ctx, [job])
    assert job.designer_format == fmt and proposed.designer_format == fmt
    # the repair follows the recorded format, whatever the prompt's text says
    failed = _truncated(proposed, prompt="Write an environment.")
    (verdict,) = stages.validate_batch(ctx, [failed])
    assert verdict.error_kind == "truncated"
    repair = stages.repair_job(ctx, env_id="abcdef-e00000-r1", failed=failed, verdict=verdict, skill_history=lambda s: [])
    assert f"under {FORMATS[fmt].short_lines} lines" in repair.messages[-1]["content"]
    assert repair.designer_format == fmt
    (repaired,) = stages.propose_batch(ctx, [repair])
    assert repaired.designer_format == fmt and repaired.repair_of == proposed.env_id


def test_a_prompt_of_the_callers_own_and_a_seed_record_no_format():
    ctx = _ctx("puzzle", designer_prompt=lambda **kw: [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    job = stages.design_job(ctx, env_id="abcdef-e00000", index=0, skill_history=lambda s: [])
    (proposed,) = stages.propose_batch(ctx, [job])
    assert job.designer_format is None and proposed.designer_format is None
    seed = SeedEnv(name="coin_jars", skill="s", difficulty=0.5, code="class E: pass", source="seed_envs/coin_jars.py")
    assert stages.seed_proposal(_ctx("puzzle"), seed, "abcdef-s00000").designer_format is None


def test_a_v1_proposal_reads_as_before_and_its_repair_finds_the_format_in_its_prompt():
    ctx = _ctx("puzzle")
    job = stages.design_job(ctx, env_id="abcdef-e00000", index=0, skill_history=lambda s: [])
    (proposed,) = stages.propose_batch(ctx, [job])
    env = make_envelope(proposed, run_id="run-x-abcdef", producer="engine")
    assert env.schema_version == 2 and env.payload["designer_format"] == "puzzle"
    v1_payload = {k: v for k, v in env.payload.items() if k != "designer_format"}
    old = msgspec.structs.replace(env, schema_version=1, payload=v1_payload)
    recorded = old.to_json()
    event = old.event()
    assert event.designer_format is None
    assert msgspec.structs.replace(event, designer_format="puzzle") == proposed
    assert old.to_json() == recorded  # reading it changed nothing recorded
    failed = _truncated(event)
    (verdict,) = stages.validate_batch(ctx, [failed])
    # the context's format is scaffold: the repair still follows the puzzle prompt it was asked in
    other = _ctx("scaffold")
    repair = stages.repair_job(other, env_id="abcdef-e00000-r1", failed=failed, verdict=verdict, skill_history=lambda s: [])
    assert f"under {FORMATS['puzzle'].short_lines} lines" in repair.messages[-1]["content"]
    assert repair.designer_format is None


def test_a_stage_that_needs_the_sandbox_says_the_context_has_none():
    ctx = _ctx()
    with pytest.raises(RuntimeError, match="no sandbox pool"):
        ctx.open_session("class E: pass")
    proposed = EnvironmentProposed(env_id="abcdef-e00000", skill="s", difficulty=0.5, code="class E: pass",
                                   code_sha256="0", policy_version="v0")
    with pytest.raises(RuntimeError, match="no validator"):
        stages.validate_batch(ctx, [proposed])
    assert stages.garbage_probe(ctx, proposed) is None  # a probe without a sandbox is skipped, as before
