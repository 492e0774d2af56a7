"""The stages of the self-play pipeline, each a function from input events to output payloads.

Stages hold no state of their own: the single-process loop (:mod:`..loop`) and distributed workers
read the input events from the log, call a stage, and append what it returns. One module each:

* :mod:`.context`: :class:`StageContext`, the shared resources of a run's stages, typed by what
  the stages use of them; :mod:`.rotation`: the skill of each new slot; :mod:`.names`: the stage
  and worker role names;
* :mod:`.design` (and its prompt, :mod:`.prompt`): corpus document + seed and memory examples ->
  designer -> ``EnvironmentProposed`` (:func:`propose`, :func:`propose_repair` for a rejected
  candidate, :func:`propose_batch` for several design requests in one batched generate call;
  :func:`seed_proposal` records a seed environment);
* :mod:`.validate`: :func:`validate` / :func:`validate_batch`: a truncated completion is rejected
  first (error kind ``truncated``), then the sandboxed validator (several at once, one per sandbox
  worker; seeds and probes drawn from the run seed and the env key), then embedding novelty (one
  batched embedding call) and the copy check against the seed archive (:mod:`.novelty_copies`)
  -> ``EnvironmentValidated``;
* :mod:`.hint`: :func:`write_hint`: hint writer + the play-time garbage probe -> ``HintWritten``;
* :mod:`.play`: :func:`play`: k plain + k hinted plays in the sandbox -> ``RolloutCompleted`` each;
* :mod:`.regret`: :func:`estimate_regret` (pure): plays + the garbage probe -> ``RegretEstimated``.

Seeds are derived from ``(run seed, env key, ...)`` with :func:`derive_seed`, never from a running
random state, so a resumed run makes the same choices for the same environment, and two runs with
the same seed make the same choices everywhere (:func:`env_key` is the environment id without the
run's own suffix). Each role's generation settings (``[policy.generation.<role>]``) travel with
its requests (:meth:`StageContext.request`).

Everything is imported here, so ``from spade_engine.engine.stages import X`` reads as it did when
the stages were one module.
"""

from __future__ import annotations

from ..seeds import derive_seed, env_key, seed_env_id
from .context import (
    Embedder,
    EnvValidator,
    NoveltyMemory,
    RoleSettings,
    SessionPool,
    StageContext,
    Timings,
    role_settings,
)
from .design import (
    NOMINAL_DIFFICULTIES,
    DesignJob,
    design_job,
    propose,
    propose_batch,
    propose_repair,
    repair_job,
    seed_proposal,
)
from .hint import garbage_probe, garbage_probes, write_hint
from .names import StageName, WorkerRole
from .novelty_copies import code_lines, copied_seed, copied_share, judge_novelty
from .play import play, play_specs
from .prompt import DEFAULT_DESIGNER_BATCH, code_examples, designer_batch, fit_prompt, prompt_builder
from .regret import estimate_regret
from .rotation import choose_skill
from .validate import validate, validate_batch, validation_seed

__all__ = [
    "derive_seed",
    "env_key",
    "seed_env_id",
    "NOMINAL_DIFFICULTIES",
    "StageName",
    "WorkerRole",
    "StageContext",
    "NoveltyMemory",
    "Embedder",
    "EnvValidator",
    "SessionPool",
    "RoleSettings",
    "role_settings",
    "Timings",
    "choose_skill",
    "DesignJob",
    "propose",
    "propose_batch",
    "design_job",
    "repair_job",
    "propose_repair",
    "seed_proposal",
    "prompt_builder",
    "DEFAULT_DESIGNER_BATCH",
    "designer_batch",
    "code_examples",
    "fit_prompt",
    "validate",
    "validation_seed",
    "validate_batch",
    "judge_novelty",
    "code_lines",
    "copied_share",
    "copied_seed",
    "garbage_probe",
    "garbage_probes",
    "write_hint",
    "play_specs",
    "play",
    "estimate_regret",
]
