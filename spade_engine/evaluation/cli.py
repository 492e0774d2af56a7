"""``spade-engine eval SUITE...``: score a policy on held-out suites and record the results.

The policy is ``--model M`` (a local model, a hub id available offline, ``tiny[:SEED]``, or
``procedural`` for the labelled simulation) or ``--run R [--version V]`` (that run's checkpoint;
``--model`` then overrides the base model it is loaded into). This module is the one place that
builds a policy for evaluation (:func:`build_policy`).

Output: a table (or ``--json``) with accuracy per task and its 95% Wilson interval; one
``EvaluationCompleted`` per task is recorded (see :mod:`.recording` for where).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..cli_common import BackendOpt, BootstrapOpt, DataDirOpt, console, handle_errors, locate, new_run_place, open_run
from ..textout import aside, note, plain, print_json, table
from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import EngineConfig
    from ..policy.protocol import Policy
    from .checkpoint import RunCheckpoint

__all__ = ["eval_command", "build_policy"]

#: sampling temperature of avg@k when --temperature is not given (the SPADE release's agent)
DEFAULT_SAMPLING_TEMPERATURE = 0.6


def build_policy(
    model: str, *, device: str, dtype: str, max_new_tokens: int, temperature: float, batch_size: int,
    checkpoint: "RunCheckpoint | None" = None, data_dir: Path | None = None, kind: str | None = None,
) -> "Policy":
    """The policy to evaluate: ``make_policy`` of a PolicyConfig, then the run's checkpoint loaded.
    ``kind``: the backend (default: as ``start --model`` picks it, llama.cpp for a GGUF model on
    a CPU, else transformers)."""
    from ..config import PolicyConfig
    from ..policy.choice import default_kind_for_model
    from ..policy.registry import lookup, make_policy

    # ``--model procedural`` (a backend that needs no model) names that backend; any other model
    # runs on ``kind``
    named = lookup(model)
    if named is not None and not named.needs_model:
        kind, spec = model, None
    else:
        if kind is None and checkpoint is not None and checkpoint.path is not None and checkpoint.adapter is None:
            kind = "transformers"  # merged weights only (a full fine-tune): llama.cpp serves adapters
        kind, spec = kind or default_kind_for_model(model), model
    if kind == "llamacpp":
        from ..policy.llamacpp_lib import ensure_installed

        ensure_installed(say=note)
    cfg = PolicyConfig.model_validate({
        "kind": kind, "model": spec,
        "transformers": {"device": device, "dtype": dtype},
        "llamacpp": {"parallel": min(max(batch_size, 1), 32)},
        "generation": {"max_new_tokens": max_new_tokens, "temperature": temperature},
    })
    policy = make_policy(cfg, data_dir=data_dir)
    if hasattr(policy, "batch_size"):
        policy.batch_size = max(int(policy.batch_size), batch_size)
    if checkpoint is not None:
        path = str(checkpoint.path) if checkpoint.path is not None else None
        adapter = str(checkpoint.adapter) if checkpoint.adapter is not None else None
        policy.load_version(checkpoint.version, path, adapter=adapter)
    return policy


def _run_model(log: Any) -> str:
    """The model a run's policy was built from (its recorded ``policy.model``)."""
    from ..policy.registry import backend
    from ..recorded import recorded_config_or_default

    cfg = recorded_config_or_default(log)
    if backend(cfg.policy.kind).needs_model and cfg.policy.model:
        return cfg.policy.model
    raise ConfigError(
        f"run {log.run_id} records no model to evaluate: its policy is {cfg.policy.kind} (the offline simulation); "
        "evaluate a model with --model M"
    )


class _Progress:
    """Live bars on a terminal; otherwise a plain line per task at most every ``every_s`` seconds."""

    def __init__(self, enabled: bool, every_s: float = 2.0):
        self.enabled = enabled
        self.every_s = every_s
        self.bars: Any = None
        self.ids: dict[str, Any] = {}
        self.last: dict[str, float] = {}
        if enabled and console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bars = Progress(
                TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=console, transient=False,
            )

    def __enter__(self) -> "_Progress":
        if self.bars is not None:
            self.bars.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.__exit__(*exc)

    def __call__(self, task: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bars is not None:
            if task not in self.ids:
                self.ids[task] = self.bars.add_task(_plain(task).plain, total=total)
            self.bars.update(self.ids[task], completed=done)
            return
        now = time.monotonic()
        if done >= total or now - self.last.get(task, 0.0) >= self.every_s:
            self.last[task] = now
            note(f"eval {task}: {done}/{total} items")


def _plain(text: str) -> Any:
    """A cell shown verbatim: no markup, control characters escaped (skills and model names may
    come from model-written or user text)."""
    return plain(text)


_COLUMNS = ("suite", "task", "items", "k", "acc", "95% CI", "score", "err")


def _print_table(events: list[Any], title: str) -> None:
    """The results: a table on a terminal, TSV (header first) in a pipe or file."""
    rows = [
        (ev.suite, ev.task, str(ev.items), str(ev.k), f"{ev.accuracy:.3f}", f"{ev.ci_low:.3f}-{ev.ci_high:.3f}",
         f"{ev.mean_score:.3f}", str(ev.scoring_errors))
        for ev in events
    ]
    table(_COLUMNS, rows, title=title, right=_COLUMNS[2:])


@handle_errors
def eval_command(
    suites: Annotated[list[str], typer.Argument(help="reasoning-gym[:TASK,TASK...] (default tasks if none) or archive:RUN; several allowed.", show_default=False)],
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model: a catalogue name, local directory, .gguf file, offline hub id, tiny[:SEED] or procedural. With --run: the base model to load the checkpoint into.")] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="Evaluate this run's policy (a PolicyUpdated checkpoint).")] = None,
    version: Annotated[str, typer.Option("--version", help="With --run: policy version (v3), latest, or v0 (base weights).")] = "latest",
    size: Annotated[Optional[int], typer.Option("--size", "-n", help="Items per reasoning-gym task (default 50); archive: at most this many environments (default all).", min=1)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Suite seed: picks the items (always from the evaluation seed range).", min=0)] = 0,
    samples: Annotated[int, typer.Option("--samples", "-k", help="Answers per item: 1 = greedy, k > 1 = avg@k sampled.", min=1)] = 1,
    temperature: Annotated[Optional[float], typer.Option("--temperature", help=f"Sampling temperature (default 0 for k=1, {DEFAULT_SAMPLING_TEMPERATURE} for k>1).", min=0.0)] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Token budget per answer (per turn for archive environments).", min=1)] = 512,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Requests per generate call (reasoning-gym).", min=1)] = 16,
    prompt: Annotated[str, typer.Option("--prompt", help="Prompt of reasoning-gym items, by name: boxed-v1 (default), boxed-v2 (an empty box, step by step) agent-v1 (as the agent plays a reasoning-gym pool item: its system prompt, the pool's instruction after the question) or agent-plain-v1 (the agent's system prompt, the bare question); recorded as prompt_version.")] = "boxed-v1",
    policy_kind: Annotated[Optional[str], typer.Option("--policy", metavar="llamacpp|transformers|vllm", help="The backend that runs the model (default: llamacpp for a catalogue model or .gguf file on a machine without CUDA, transformers otherwise).", show_default=False)] = None,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:1 or auto.")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto, bf16, fp16 or fp32.")] = "auto",
    record_run: Annotated[Optional[str], typer.Option("--record-run", help="Record into this existing run (default: the --run run, else the 'evaluations' log).")] = None,
    no_record: Annotated[bool, typer.Option("--no-record", help="Print results without recording them.")] = False,
    config_file: Annotated[Optional[Path], typer.Option("--config", "-c", help="TOML config (sandbox limits for archive suites).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", help="Sandbox workers for archive suites (sandbox.workers): plays at once.", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress on stderr.")] = True,
    data_dir: DataDirOpt = None,
    backend: BackendOpt = None,
    bootstrap: BootstrapOpt = None,
) -> None:
    """Score a policy on held-out suites: accuracy per task with a 95% Wilson interval, greedy or
    avg@k. Each task's result is recorded as an EvaluationCompleted event. Evaluation items come
    from a seed range no training source uses."""
    plan = plan_eval(EvalOptions(
        suites=tuple(suites), model=model, run=run, version=version, size=size, seed=seed, samples=samples,
        temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size, prompt=prompt,
        policy_kind=policy_kind, device=device, dtype=dtype, record_run=record_run, no_record=no_record,
        config_file=config_file, workers=workers, data_dir=data_dir, backend=backend, bootstrap=bootstrap,
    ))
    outcome = run_eval(plan, progress=progress)
    present_eval(outcome, settings=plan.settings, as_json=as_json)


@dataclass(frozen=True)
class EvalOptions:
    """The options of ``spade-engine eval`` (see its ``--help`` for each)."""

    suites: tuple[str, ...]
    model: str | None = None
    run: str | None = None
    version: str = "latest"
    size: int | None = None
    seed: int = 0
    samples: int = 1
    temperature: float | None = None
    max_new_tokens: int = 512
    batch_size: int = 16
    prompt: str = "boxed-v1"
    policy_kind: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    record_run: str | None = None
    no_record: bool = False
    config_file: Path | None = None
    workers: int | None = None
    data_dir: Path | None = None
    backend: str | None = None
    bootstrap: str | None = None


@dataclass(frozen=True)
class EvalPlan:
    """What ``eval`` will do, resolved and checked before a model is loaded."""

    options: EvalOptions
    root: Path
    backend: str
    bootstrap: str | None
    settings: Any  # EvalSettings
    cfg: EngineConfig  # the sandbox section, for archive suites (runs.run_config.eval_config_for)
    model: str
    checkpoint: Any  # a found checkpoint, or None for the base weights
    tasks: list[Any]
    #: the run results go to (``None``: not recorded)
    target: str | None


@dataclass(frozen=True)
class EvalOutcome:
    """One evaluation's results, as recorded."""

    evaluation_id: str
    recorded_in: str | None
    info: Any  # PolicyInfo
    events: list[Any]


def plan_eval(o: EvalOptions) -> EvalPlan:
    """Resolve where results go, the policy (a model, or a run's checkpoint) and the suites' tasks;
    every check that needs no model happens here."""
    from ..blobs import BlobStore
    from ..events.store import resolve_data_dir, resolve_run
    from ..runs.run_config import eval_config_for
    from .checkpoint import find_checkpoint
    from .recording import EVALUATIONS_RUN
    from .runner import EvalSettings
    from .suites import archive_tasks, parse_suite, reasoning_gym_tasks

    root = resolve_data_dir(o.data_dir)
    b, boot = new_run_place(o.backend, o.bootstrap)  # where results go without a run
    if o.run is not None:  # the evaluated run's log, where its data directory remembers it lives
        where = locate(o.run, root, o.backend, o.bootstrap)
        b, boot = where.backend, where.bootstrap
    if o.model is None and o.run is None:
        raise ConfigError("give a policy: --model M, or --run R [--version V]")
    temp = o.temperature if o.temperature is not None else (0.0 if o.samples == 1 else DEFAULT_SAMPLING_TEMPERATURE)
    settings = EvalSettings(k=o.samples, temperature=temp, max_new_tokens=o.max_new_tokens, batch_size=o.batch_size,
                            prompt=o.prompt)
    cfg = eval_config_for(o.config_file, workers=o.workers)

    target: str | None = None  # where results go, resolved before any work is done
    if not o.no_record and o.record_run is not None:
        target = resolve_run(o.record_run, data_dir=root, backend=b, bootstrap=boot)

    model = o.model
    checkpoint = None
    trained_on: set[str] = set()  # runs whose environments the evaluated policy was trained on
    if o.run is not None:
        run_id, log = open_run(o.run, o.data_dir, b, boot, read_only=True)
        try:
            checkpoint = find_checkpoint(log, o.version, BlobStore(root / "blobs"))
            if model is None:
                model = checkpoint.base_model or _run_model(log)
            trained_on = {checkpoint.run_id, *_archive_sources(log, root, b, boot)}
        finally:
            log.close()

    specs = [parse_suite(s) for s in o.suites]  # a bad suite before a model is loaded (after the run's checks: cheap)
    tasks = []
    for spec in specs:
        if spec.kind == "reasoning-gym":
            tasks.extend(reasoning_gym_tasks(spec, size=o.size, seed=o.seed))
            continue
        src_id, src = open_run(spec.run, o.data_dir, b, boot, read_only=True)
        try:
            tasks.extend(archive_tasks(src, size=o.size, seed=o.seed))
        finally:
            src.close()
        if src_id in trained_on:
            note(f"warning: the policy was trained on run {src_id}'s environments: archive:{src_id} is not held out for it")

    labels = [t.label for t in tasks]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"a task is named twice: {', '.join(sorted({x for x in labels if labels.count(x) > 1}))}")
    assert model is not None
    if not o.no_record:
        target = target or (checkpoint.run_id if checkpoint is not None else EVALUATIONS_RUN)
    return EvalPlan(options=o, root=root, backend=b, bootstrap=boot, settings=settings, cfg=cfg, model=model,
                    checkpoint=checkpoint, tasks=tasks, target=target)


def run_eval(plan: EvalPlan, *, progress: bool) -> EvalOutcome:
    """Load the policy, score every task and record each task's result as it finishes (an
    interrupted evaluation keeps the tasks it finished)."""
    from ..events.envelope import new_event_id
    from ..events.store import open_event_log
    from .recording import EVALUATIONS_RUN, open_evaluations_log, record
    from .runner import evaluate, policy_info

    o, checkpoint, settings = plan.options, plan.checkpoint, plan.settings
    policy = build_policy(
        plan.model, device=o.device, dtype=o.dtype, max_new_tokens=o.max_new_tokens, temperature=settings.temperature,
        batch_size=o.batch_size, checkpoint=checkpoint, data_dir=plan.root, kind=o.policy_kind,
    )
    info = policy_info(
        policy, checkpoint_sha256=checkpoint.sha256 if checkpoint else None, run_id=checkpoint.run_id if checkpoint else None
    )
    pool = None
    if any(t.dataset is None for t in plan.tasks):
        from ..sandbox import SandboxPool

        pool = SandboxPool(plan.cfg.sandbox)
    evaluation_id = new_event_id()
    log = None
    if plan.target == EVALUATIONS_RUN:
        log = open_evaluations_log(plan.root, backend=plan.backend, bootstrap=plan.bootstrap)
    elif plan.target is not None:
        log = open_event_log(plan.target, data_dir=plan.root, backend=plan.backend, bootstrap=plan.bootstrap)

    finished: dict[int, Any] = {}

    def task_done(index: int, result: Any) -> None:  # recorded as it finishes: an interrupted run keeps it
        finished[index] = result.event(evaluation_id=evaluation_id, policy=info, settings=settings)
        if log is not None:
            record(log, [finished[index]])

    try:
        with _Progress(progress) as bar:
            results = evaluate(
                policy, plan.tasks, settings, pool=pool, step_timeout_s=plan.cfg.sandbox.step_timeout_s,
                concurrency=plan.cfg.sandbox.workers, on_progress=bar, on_task_done=task_done,
            )
    finally:
        if pool is not None:
            pool.close()
        policy.close()
        if log is not None:
            log.close()
    return EvalOutcome(evaluation_id=evaluation_id, recorded_in=plan.target, info=info,
                       events=[finished[i] for i in range(len(results))])


def present_eval(outcome: EvalOutcome, *, settings: Any, as_json: bool) -> None:
    """Print the results: a table and a note on the columns, or JSON."""
    from ..events.catalogue import payload_to_builtins

    info, events = outcome.info, outcome.events
    if as_json:
        doc = {
            "evaluation_id": outcome.evaluation_id,
            "recorded_in": outcome.recorded_in,
            "policy": {"version": info.version, "model": info.model, "checkpoint_sha256": info.checkpoint_sha256, "run_id": info.run_id},
            "results": [payload_to_builtins(e) for e in events],
        }
        print_json(doc, sort_keys=True)
        return
    mode = "greedy" if settings.greedy else f"avg@{settings.k}, temperature {settings.temperature:g}"
    _print_table(events, f"{info.model} {info.version} ({mode})")
    where = f"recorded in {outcome.recorded_in}" if outcome.recorded_in else "not recorded"
    aside(
        f"evaluation {outcome.evaluation_id}: {len(events)} task(s), {where}. acc: answers the task's verifier "
        "scored 1.0 (avg@k); 95% CI: Wilson over items; score: mean verifier score; err: verifier errors "
        "or abnormal plays"
    )


def _archive_sources(log: Any, root: Path, backend: str, bootstrap: str | None) -> list[str]:
    """The run ids a run took its environments from (``loop.env_source = archive:RUN``), so an
    evaluation on that archive is flagged as not held out."""
    from ..recorded import recorded_config

    cfg = recorded_config(log)
    from ..envsources.spec import source_of

    spec = source_of(cfg.loop) if cfg is not None and cfg.loop.env_source else None
    if spec is None or spec.kind != "archive" or not spec.run:
        return []
    try:
        from ..events.store import resolve_run

        return [resolve_run(spec.run, data_dir=root, backend=backend, bootstrap=bootstrap)]
    except Exception:  # noqa: BLE001 - the source run may be gone: then it is not evaluated either
        return []
