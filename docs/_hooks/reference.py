"""MkDocs hook: the reference pages, generated from the code at build time (never committed).

* ``reference/cli.md``: every command of the Typer app (``spade_engine.cli.app``), from its click
  command tree: usage, help, arguments and options exactly as ``--help`` prints them;
* ``reference/config.md``: every key of the config (``spade_engine.config.EngineConfig`` and the
  registered policy backends' sections): type, default and description from the pydantic models;
  a key without a description is a build warning (so ``mkdocs build --strict`` fails);
* ``reference/events.md``: every event type of ``spade_engine.events.catalogue`` with its schema
  version, key, docstring, fields and upcasters; the envelope and the value types;
* ``reference/presets.md``: the TOML of every shipped preset;
* ``results/index.md``: the dated results pages under ``docs/results/`` (written by the bench
  scripts' ``--report``) with their provenance, and the raw benchmark JSON under
  ``bench/results/`` (each shown on a generated page).

Hand-written pages may hold ``<!-- generated: NAME -->`` markers, replaced by a table made from
the code (:data:`MARKERS`: the stage table, the policy and log backends, the model catalogue, the
event types, the presets). A marker with an unknown name is a build error.

The page HTML is tidied too: Sphinx roles left in docstrings (``:class:`~a.b.C``` renders as
``:class:<code>~a.b.C</code>``) become plain code (``C``).
"""

from __future__ import annotations

import json
import logging
import re
import types
import typing
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.reference")

ROOT = Path(__file__).resolve().parents[2]


# -- Markdown helpers ------------------------------------------------------------------------------


_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")


def _cell(text: str) -> str:
    """Text for one table cell: one line, pipes and angle brackets escaped, code spans kept."""
    text = " ".join(str(text).split())
    out = []
    for part in _CODE_SPAN.split(text):
        if _CODE_SPAN.fullmatch(part):
            out.append(part.replace("|", "\\|"))
        else:
            out.append(_escape(part).replace("|", "\\|"))
    return "".join(out)


def _escape(text: str) -> str:
    """Plain text for Markdown: no emphasis, no HTML, no link syntax."""
    text = text.replace("\\", "\\\\")
    for ch in "*_[]":
        text = text.replace(ch, "\\" + ch)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Inline code that may itself contain backticks."""
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _docstring(text: str | None) -> str:
    """A docstring as Markdown paragraphs: dedented, ``literal`` kept, roles reduced to code, a
    Google-style ``Attributes:`` section left out (:func:`_attributes` reads it), and angle
    brackets outside code escaped (``<run dir>`` is text, not an HTML tag)."""
    import inspect

    text = inspect.cleandoc(text or "")
    text = re.split(r"\n\s*Attributes:\n", "\n" + text, maxsplit=1)[0].strip()
    text = re.sub(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`~?\.?([^`]+)`", lambda m: f"``{m.group(1)}``", text)
    return "".join(part if _CODE_SPAN.fullmatch(part) else part.replace("<", "&lt;").replace(">", "&gt;")
                   for part in _CODE_SPAN.split(text))


def _attributes(text: str | None) -> dict[str, str]:
    """The ``name: description`` entries of a Google-style ``Attributes:`` section."""
    import inspect

    parts = re.split(r"\n\s*Attributes:\n", "\n" + inspect.cleandoc(text or ""), maxsplit=1)
    out: dict[str, str] = {}
    if len(parts) == 2:
        name = None
        for line in parts[1].splitlines():
            m = re.match(r"\s+(\w+):\s*(.*)", line)
            if m and (name is None or len(line) - len(line.lstrip()) <= 8):
                name = m.group(1)
                out[name] = m.group(2)
            elif name and line.strip():
                out[name] += " " + line.strip()
    return out


# -- the CLI ---------------------------------------------------------------------------------------


def cli_page() -> str:
    """Every command of ``spade-engine`` from the click command tree of the Typer app."""
    import typer
    from typer.core import TyperGroup

    from spade_engine.cli import app

    # Typer carries its own click (typer.Context is its Context class)
    root = typer.main.get_command(app)
    root_ctx = typer.Context(root, info_name="spade-engine")
    out = [
        "# Command line\n",
        "Generated at build time from the Typer app (`spade_engine.cli.app`): every command, its "
        "arguments and options as `spade-engine COMMAND --help` prints them. Every command finds the "
        "data directory the same way (`--data-dir`, then `$SPADE_DATA`, then `./spade-data`), and a "
        "RUN argument defaults to the latest run (a unique prefix of a run id is accepted).\n",
    ]
    commands: list[tuple[list[str], Any, Any]] = []

    def walk(group: Any, ctx: Any, path: list[str]) -> None:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            sub = typer.Context(cmd, info_name=name, parent=ctx)
            commands.append(([*path, name], cmd, sub))
            if isinstance(cmd, TyperGroup):
                walk(cmd, sub, [*path, name])

    walk(root, root_ctx, [])
    out.append(_table(["command", "what it does"], [
        [f"[{_code('spade-engine ' + ' '.join(p))}](#{_anchor(p)})", _cell(_short_help(c))] for p, c, _ in commands
    ]))
    out.append(_params_section(root, root_ctx, "Options of `spade-engine` itself", level=2))
    for path, cmd, ctx in commands:
        out.append(f'\n## spade-engine {" ".join(path)} {{ #{_anchor(path)} }}\n')
        out.append("```text\n" + cmd.get_usage(ctx) + "\n```\n")
        if cmd.help:
            out.append(_help_text(cmd.help) + "\n")
        if isinstance(cmd, TyperGroup):
            subs = [n for n in cmd.list_commands(ctx) if (c := cmd.get_command(ctx, n)) is not None and not c.hidden]
            out.append("Subcommands: " + ", ".join(f"[{_code(n)}](#{_anchor([*path, n])})" for n in subs) + ".\n")
        out.append(_params_section(cmd, ctx, None, level=3))
    return "\n".join(out)


def _anchor(path: list[str]) -> str:
    return "cli-" + "-".join(path)


def _short_help(cmd: Any) -> str:
    if cmd.short_help:
        return str(cmd.short_help)
    from spade_engine.cli_app import first_sentence

    return first_sentence(cmd.help or "")


def _help_text(text: str) -> str:
    """Click help text as Markdown paragraphs (``\\b`` blocks kept as they are)."""
    import inspect

    paras = []
    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            paras.append("```text\n" + para.lstrip("\b\n") + "\n```")
        else:
            paras.append(_cell(para))
    return "\n\n".join(paras)


def _params_section(cmd: Any, ctx: Any, title: str | None, *, level: int) -> str:
    from typer.core import TyperArgument, TyperOption

    args, opts = [], []
    for param in cmd.get_params(ctx):
        if isinstance(param, TyperOption):
            if param.name == "help":
                continue
            record = param.get_help_record(ctx)
            if record is not None:
                opts.append([_code(record[0]), _cell(record[1])])
        elif isinstance(param, TyperArgument):
            record = param.get_help_record(ctx)
            if record is not None:
                args.append([_code(record[0]), _cell(record[1])])
    out = []
    if title:
        out.append("#" * level + " " + title + "\n")
    if args:
        out.append("**Arguments**\n\n" + _table(["argument", "meaning"], args))
    if opts:
        out.append("**Options**\n\n" + _table(["option", "meaning"], opts))
    return "\n".join(out)


# -- the config ------------------------------------------------------------------------------------


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, tuple, set):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args)}]"
    if origin is dict:
        return f"dict[{', '.join(_type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _constraints(field: Any) -> str:
    marks = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    out = []
    for meta in field.metadata:
        for attr, sign in marks.items():
            value = getattr(meta, attr, None)  # annotated_types.Ge/Gt/Le/Lt each carry one bound
            if value is not None:
                out.append(f"{sign} {value:g}" if isinstance(value, float) else f"{sign} {value}")
    return ", ".join(out)


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code("true" if value else "false")
    if isinstance(value, (int, float)):
        return _code(repr(value))
    return _code(json.dumps(value))


def config_page() -> str:
    """Every key of the config with its type, default and description."""
    from pydantic import BaseModel

    from spade_engine.config import EngineConfig, PolicyConfig
    from spade_engine.policy.registry import backend, backend_settings

    out = [
        "# Configuration\n",
        "Generated at build time from the pydantic models in `spade_engine/config.py` and the "
        "settings models of the registered policy backends. A run's config is resolved as "
        "defaults < preset < TOML file (`--config`) < environment (`SPADE_<SECTION>__<KEY>`, e.g. "
        "`SPADE_LOOP__MAX_ENVS=20`; nested sections join with `__`) < flags (`--set KEY=VALUE` "
        "and the named options), and recorded in `RunStarted`. "
        "`spade-engine config show` prints every value with where it came from; a key with a typo "
        "is an error naming the nearest known keys.\n",
    ]
    missing: list[str] = []

    def section(model: type[BaseModel], instance: Any, dotted: str, doc: str | None = None) -> None:
        rows, subs = [], []
        for name, field in model.model_fields.items():
            ann = field.annotation
            key = f"{dotted}.{name}" if dotted else name
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                sub_default = getattr(instance, name) if instance is not None else field.get_default(call_default_factory=True)
                subs.append((ann, sub_default, key))
                continue
            if not field.description:
                missing.append(key)
            value = getattr(instance, name) if instance is not None else field.get_default(call_default_factory=True)
            kind = _type_name(ann)
            bounds = _constraints(field)
            rows.append([_code(name), kind + (f" ({bounds})" if bounds else ""), _default(value), _cell(field.description or "")])
        if dotted:
            out.append(f"\n## `[{dotted}]` {{ #{dotted.replace('.', '-')} }}\n")
        text = _docstring(doc if doc is not None else model.__doc__)
        if text:
            out.append(text + "\n")
        if rows:
            out.append(_table(["key", "type", "default", "description"], rows))
        for sub_model, sub_default, key in subs:
            if sub_model is PolicyConfig:
                policy_section(sub_default)
            else:
                section(sub_model, sub_default, key)

    def policy_section(instance: Any) -> None:
        section(_PolicyKeys, None, "policy", PolicyConfig.__doc__)
        gen = PolicyConfig.model_fields["generation"]
        section(gen.annotation, instance.generation, "policy.generation")
        for name, model in backend_settings().items():
            section(model, None, f"policy.{name}", f"{_docstring(model.__doc__)}\n\nBackend `{name}`: {backend(name).description}.")

    class _PolicyKeys(BaseModel):
        """The keys of ``[policy]`` that are not sections."""

    _PolicyKeys.model_fields.update({k: f for k, f in PolicyConfig.model_fields.items() if k != "generation"})
    _PolicyKeys.model_rebuild(force=True)

    out.append("## Top level\n")
    section(EngineConfig, EngineConfig(), "", "Keys outside any section.")
    for key in missing:
        log.warning("config key %s has no description: add description= to its Field", key)
    return "\n".join(out)


# -- the event catalogue ---------------------------------------------------------------------------


def _struct_fields(cls: Any) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a msgspec struct's field table (with a description column when its
    docstring has an ``Attributes:`` section)."""
    import msgspec

    described = _attributes(cls.__doc__)
    rows = []
    hints = typing.get_type_hints(cls)
    for f in msgspec.structs.fields(cls):
        if f.default is not msgspec.NODEFAULT:
            default = _default(f.default)
        elif f.default_factory is not msgspec.NODEFAULT:
            default = _default(f.default_factory())
        else:
            default = "required"
        row = [_code(f.encode_name), _cell(_type_name(hints.get(f.name, f.type)).replace("\\|", "|")), default]
        if described:
            row.append(_cell(described.get(f.name, "")))
        rows.append(row)
    return ["field", "type", "default"] + (["description"] if described else []), rows


def events_page() -> str:
    """Every event type: version, key, meaning, fields, upcasters; the envelope and value types."""
    from spade_engine.events import catalogue
    from spade_engine.events.envelope import Envelope

    out = [
        "# Event catalogue\n",
        "Generated at build time from `spade_engine/events/catalogue.py`, the contract between "
        "stages. Every event is an envelope (below) around a payload of one of these types, stored "
        "as canonical JSON. A change to a payload is a versioned addition: its `VERSION` goes up "
        "and an upcaster turns the previous version into the new one on read "
        "(see [the catalogue and its versions](../concepts/events.md)). "
        "`spade-engine events schema` prints the JSON Schema of each.\n",
        "## Event types\n",
        event_types_table(),
        "## The envelope\n",
        _docstring(Envelope.__doc__) + "\n",
        _table(*_struct_fields(Envelope)),
    ]
    upcasters: dict[str, list[tuple[int, Any]]] = {}
    for (name, version), fn in catalogue.UPCASTERS.items():
        upcasters.setdefault(name, []).append((version, fn))
    for name, cls in catalogue.EVENT_TYPES.items():
        key = f"`{cls.KEY_FIELD}` (the environment)" if cls.KEY_FIELD else "the run id"
        out.append(f"\n## {name} {{ #{name.lower()} }}\n")
        out.append(f"Schema version **{cls.VERSION}**; key: {key}.\n")
        out.append(_docstring(cls.__doc__) + "\n")
        out.append(_table(*_struct_fields(cls)))
        for version, fn in sorted(upcasters.get(name, []), key=lambda x: x[0]):
            out.append(f"- upcast v{version} → v{version + 1}: {_cell(_docstring(fn.__doc__) or 'no change to the fields read')}")
        if name in upcasters:
            out.append("")
    out.append("\n## Value types\n")
    out.append("Structures used inside payloads.\n")
    for value in (catalogue.BlobRef, catalogue.DocumentRef, catalogue.Generation, catalogue.ValidationCheck,
                  catalogue.Turn, catalogue.GarbageProbe):
        out.append(f"\n### {value.__name__} {{ #{value.__name__.lower()} }}\n")
        out.append(_docstring(value.__doc__) + "\n")
        out.append(_table(*_struct_fields(value)))
    out.append("\n## End reasons\n")
    out.append("Why a play ended (`RolloutCompleted.end_reason`): " + ", ".join(_code(r) for r in catalogue.END_REASONS) + ".\n")
    return "\n".join(out)


def event_types_table(link: str = "") -> str:
    """One row per event type; ``link`` is the path of the events reference from the page."""
    from spade_engine.events import catalogue

    rows = []
    for name, cls in catalogue.EVENT_TYPES.items():
        first = _docstring(cls.__doc__).split("\n\n")[0]
        rows.append([f"[{_code(name)}]({link}#{name.lower()})", str(cls.VERSION),
                     _code(cls.KEY_FIELD) if cls.KEY_FIELD else "run", _cell(first)])
    return _table(["event", "version", "key", "what it records"], rows)


# -- tables for hand-written pages -----------------------------------------------------------------


def stage_table(root: str) -> str:
    from spade_engine.engine.pipeline import STAGES, role_inputs

    rows = [[_code(s.name), _code(s.input_event), ", ".join(_code(o) for o in s.outputs), _code(s.role)] for s in STAGES.values()]
    roles = sorted({s.role for s in STAGES.values()})
    text = _table(["stage", "runs on", "appends", "role"], rows)
    text += "\nThe event types each role reads (`role_inputs`: the inputs of its stages that it does not write itself): " + "; ".join(
        f"{_code(r)}: " + ", ".join(_code(t) for t in role_inputs(r)) for r in roles if role_inputs(r)
    ) + ".\n"
    return text


def policy_backends_table(root: str) -> str:
    from spade_engine.policy.registry import backend, backend_names

    rows = []
    for name in backend_names():
        b = backend(name)
        rows.append([_code(name), "yes" if b.trainable else "no", "yes" if b.needs_model else "no",
                     _cell(b.description), f"[`[policy.{name}]`]({root}reference/config.md#policy-{name})" if b.settings else "none"])
    return _table(["`policy.kind`", "trainable", "needs a model", "what it is", "settings"], rows)


def log_backends_table(root: str) -> str:
    from spade_engine.events.backends import BACKENDS

    rows = [[_code(name), _cell(b.description), _code(b.consumer_driver), "yes" if b.takes_bootstrap else "no"]
            for name, b in BACKENDS.items()]
    return _table(["`log.backend`", "what it is", "projection driver", "takes `--bootstrap`"], rows)


def model_catalogue_table(root: str) -> str:
    from spade_engine.models.catalogue import load_catalogue

    rows = []
    for e in load_catalogue():
        size = f"{e.gguf_size / 1e6:,.0f} MB"
        parts = e.parts[0].requirement if len(e.parts) == 1 else f"{len(e.parts)} part wheels ({e.parts[0].package}, ...)"
        rows.append([_code(e.name), _cell(f"{e.title} ({e.licence})"), e.params, _cell(e.quantisation), size,
                     _code(e.preset) if e.preset else "none", _cell(parts)])
    return _table(["name", "model", "parameters", "quantisation", "GGUF", "preset", "PyPI"], rows)


def presets_table(root: str) -> str:
    from spade_engine.presets import preset_names, preset_text

    rows = []
    for name in preset_names():
        first = next((ln.lstrip("# ").strip() for ln in preset_text(name).splitlines() if ln.startswith("#")), "")
        rows.append([f"[{_code(name)}]({root}reference/presets.md#{name})", _cell(first)])
    return _table(["preset", "what it is (its first comment line)"], rows)


def presets_page() -> str:
    from spade_engine.presets import preset_names, preset_text

    out = ["# Presets\n",
           "Generated at build time: the TOML of every preset shipped in `spade_engine/presets/`. "
           "A preset is a layer between the defaults and a config file (`start --preset NAME`, "
           "`config show --preset NAME`). Keys are described in the [configuration reference](config.md).\n"]
    for name in preset_names():
        out.append(f"\n## {name} {{ #{name} }}\n")
        out.append("```toml\n" + preset_text(name).rstrip() + "\n```\n")
    return "\n".join(out)


def package_layout(root: str) -> str:
    """Every module and subpackage of ``spade_engine`` with the first sentence of its docstring
    (read with ``ast``: nothing is imported)."""
    import ast

    from spade_engine.cli_app import first_sentence

    pkg = ROOT / "spade_engine"
    rows = []

    def doc_of(path: Path) -> str:
        return first_sentence(ast.get_docstring(ast.parse(path.read_text())) or "")

    for entry in sorted(pkg.iterdir()):
        if entry.name.startswith("_") or entry.name == "__pycache__":
            continue
        if entry.is_dir() and (entry / "__init__.py").exists():
            rows.append([_code(entry.name + "/"), _cell(doc_of(entry / "__init__.py"))])
            for sub in sorted(entry.iterdir()):
                if sub.suffix == ".py" and not sub.name.startswith("_"):
                    rows.append([_code(f"{entry.name}/{sub.name}"), _cell(doc_of(sub))])
                elif sub.is_dir() and (sub / "__init__.py").exists():
                    rows.append([_code(f"{entry.name}/{sub.name}/"), _cell(doc_of(sub / "__init__.py"))])
        elif entry.suffix == ".py":
            rows.append([_code(entry.name), _cell(doc_of(entry))])
    return _table(["module", "what it owns (its docstring's first sentence)"], rows)


#: marker name -> a function of the path from the page to the docs root (``""`` or ``"../"``)
MARKERS: dict[str, Any] = {
    "stage-table": stage_table,
    "policy-backends": policy_backends_table,
    "model-catalogue": model_catalogue_table,
    "event-types": lambda root: event_types_table(f"{root}reference/events.md"),
    "log-backends": log_backends_table,
    "presets": presets_table,
    "package-layout": package_layout,
}


# -- results ---------------------------------------------------------------------------------------


def results_pages(docs_dir: Path) -> dict[str, str]:
    """The results index, and one page per raw benchmark JSON under ``bench/results/``."""
    results = docs_dir / "results"
    pages: dict[str, str] = {}
    rows = []
    for data in sorted(results.glob("*.json"), reverse=True):
        page = data.with_suffix(".md")
        if not page.exists():
            continue
        try:
            prov = json.loads(data.read_text()).get("provenance", {})
        except ValueError as exc:
            log.warning("results file %s is not JSON: %s", data, exc)
            continue
        kind = data.stem.split("-", 3)[-1]
        rows.append([prov.get("date", data.stem[:10]), f"[{kind}]({page.name})", _code(prov.get("command", "")),
                     _code(prov.get("commit") or "unknown"), _cell(prov.get("machine", ""))])
    writers = sorted(p.name for p in (ROOT / "bench").glob("*.py") if "write_results(" in p.read_text() and p.name != "results_page.py")
    out = [
        "# Results\n",
        "Every page here was written by the script that measured it, from its own JSON: a bench "
        "script run with `--report` calls `bench/results_page.py`, which writes "
        "`docs/results/<date>-<kind>.json` (the figures, with the command, commit and machine) and "
        "the page rendered from it. Nothing here is written by hand; rerun the script to replace a "
        "page. This index is generated when the site is built.\n",
        "## Dated pages\n",
        _table(["date", "page", "command", "commit", "machine"], rows) if rows else "No results page yet.\n",
        "Scripts that write results pages (`--report`): " + (", ".join(_code("bench/" + w) for w in writers) or "none") + ".\n",
    ]
    raw = sorted((ROOT / "bench" / "results").glob("*.json"), reverse=True)
    if raw:
        out.append("## Raw benchmark JSON\n")
        out.append("JSON a benchmark printed, kept under `bench/results/` without a results page "
                   "(its script has no `--report` yet). Each is shown as recorded.\n")
        for data in raw:
            kind = data.stem.split("-", 3)[-1]
            script = ROOT / "bench" / f"{kind}.py"
            out.append(f"- [{data.stem}](bench/{data.stem}.md)" + (f": `bench/{script.name}`" if script.exists() else ""))
            pages[f"results/bench/{data.stem}.md"] = _raw_result_page(data, script if script.exists() else None)
        out.append("")
    pages["results/index.md"] = "\n".join(out)
    return pages


def _raw_result_page(data: Path, script: Path | None) -> str:
    text = data.read_text()
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        log.warning("benchmark JSON %s does not parse: %s", data, exc)
        parsed = None
    out = [f"# {data.stem}\n",
           f"Raw output of {'`bench/' + script.name + '`' if script else 'a benchmark'}, as kept in "
           f"`bench/results/{data.name}` ([download]({data.name})). Generated at build time; not a "
           "results page (no command or commit was recorded with it).\n"]
    if isinstance(parsed, dict):
        facts = [(k, parsed[k]) for k in ("date", "machine") if k in parsed]
        if facts:
            out.append(_table(["recorded", "value"], [[k, _cell(str(v))] for k, v in facts]))
        if script is not None:
            import ast

            doc = ast.get_docstring(ast.parse(script.read_text())) or ""
            if doc:
                out.append("What the script measures (its docstring):\n\n```text\n" + doc.strip() + "\n```\n")
        text = json.dumps(parsed, indent=1, sort_keys=True)
    out.append("```json\n" + text.rstrip() + "\n```\n")
    return "\n".join(out)


# -- MkDocs events ---------------------------------------------------------------------------------


def on_files(files: Files, config: Any) -> Files:
    docs_dir = Path(config["docs_dir"])
    generated = {
        "reference/cli.md": cli_page(),
        "reference/config.md": config_page(),
        "reference/events.md": events_page(),
        "reference/presets.md": presets_page(),
        **results_pages(docs_dir),
    }
    for uri, content in generated.items():
        if files.get_file_from_path(uri) is not None:
            log.warning("%s is generated: remove the committed copy from docs/", uri)
            files.remove(files.get_file_from_path(uri))
        files.append(File.generated(config, uri, content=content))
    for data in (ROOT / "bench" / "results").glob("*.json"):
        files.append(File.generated(config, f"results/bench/{data.name}", abs_src_path=str(data)))
    return files


#: a marker is a line of its own (a marker quoted in text is left alone)
_MARKER = re.compile(r"^<!--\s*generated:\s*([\w-]+)\s*-->$", re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in MARKERS:
            log.warning("%s: unknown generated marker %r (known: %s)", page.file.src_uri, name, ", ".join(MARKERS))
            return m.group(0)
        root = "../" * page.file.src_uri.count("/")
        return "\n" + MARKERS[name](root) + "\n"

    return _MARKER.sub(fill, markdown)


_ROLE_HTML = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):<code>~?\.?([^<]+)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    def short(m: re.Match[str]) -> str:
        return f"<code>{m.group(1)}</code>"

    return _ROLE_HTML.sub(short, html)
