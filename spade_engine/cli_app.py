"""How the command line is put together: command groups whose help reads well in any terminal,
and commands imported only when they are used.

* :func:`command_group`: the ``typer.Typer`` every command group is made with. Its help is Click's
  plain layout (an option's description wraps beside it, or under it when the option is long) at
  the terminal's width, not a boxed table that squeezes descriptions into a narrow column, and its
  command list shows each command's short help whole, wrapped, never cut with ``...``.
* :class:`LazyGroup`: a group whose commands are named up front (name, ``module:attribute``, short
  help) and imported on first use, so ``spade-engine --version`` and ``--help`` import none of the
  engine (no torch, transformers, SQLAlchemy or FastAPI) and ``spade-engine status`` imports only
  what ``status`` needs. ``group.commands`` is still a mapping of every command (reading one
  imports it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

__all__ = ["HelpGroup", "LazyGroup", "LazyCommand", "command_group", "first_sentence"]


def first_sentence(text: str) -> str:
    """The first paragraph of a help text up to its first full stop, on one line."""
    para = " ".join(text.strip().split("\n\n", 1)[0].split())
    end = para.find(". ")
    return para if end < 0 else para[: end + 1]


class HelpGroup(TyperGroup):
    """A Typer group whose command list gives each command's short help whole, wrapped."""

    def short_help_of(self, ctx: Any, name: str) -> str | None:
        """The short help listed for command ``name`` (None: not listed)."""
        cmd = self.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            return None
        return cmd.short_help or first_sentence(cmd.help or "")

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, short) for name in self.list_commands(ctx) if (short := self.short_help_of(ctx, name)) is not None]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def command_group(**kwargs: Any) -> typer.Typer:
    """A command group (``typer.Typer``) with the project's help layout (see :class:`HelpGroup`)."""
    return typer.Typer(cls=HelpGroup, rich_markup_mode=None, **kwargs)


@dataclass(frozen=True)
class LazyCommand:
    """A command known by name before it is imported: ``target`` is ``module:attribute``, either a
    ``typer.Typer`` (a command group) or a command function."""

    target: str
    short_help: str

    def load(self, name: str) -> Any:
        module, _, attr = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        if isinstance(obj, typer.Typer):
            cmd = typer.main.get_group(obj)
        else:
            one = typer.Typer(rich_markup_mode=None, add_completion=False)
            one.command(name)(obj)
            cmd = typer.main.get_command(one)
        cmd.name = name
        cmd.short_help = self.short_help
        return cmd


class _Commands(MutableMapping[str, Any]):
    """Commands by name, in listing order; a lazy one is imported when it is first read."""

    def __init__(self, eager: MutableMapping[str, Any], lazy: dict[str, LazyCommand], order: list[str]) -> None:
        self._loaded = dict(eager)
        self._lazy = dict(lazy)
        self._order = [n for n in order if n in self._loaded or n in self._lazy]
        self._order += [n for n in [*self._loaded, *self._lazy] if n not in self._order]

    def short_help(self, name: str) -> str | None:
        """The listed short help of a command still to be imported (None once it is loaded)."""
        lazy = self._lazy.get(name)
        return lazy.short_help if lazy is not None and name not in self._loaded else None

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            lazy = self._lazy[name]  # KeyError: no such command
            self._loaded[name] = lazy.load(name)
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._loaded[name] = cmd
        if name not in self._order:
            self._order.append(name)

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)
        self._order.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy


class LazyGroup(HelpGroup):
    """The top-level group: :attr:`lazy` names its commands, :attr:`order` the listing order.
    Listing them (``--help``) imports nothing; running one imports only that one."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}
    order: ClassVar[list[str]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands(self.commands, self.lazy, self.order)

    def short_help_of(self, ctx: Any, name: str) -> str | None:
        commands = self.commands
        if isinstance(commands, _Commands) and (short := commands.short_help(name)) is not None:
            return short
        return super().short_help_of(ctx, name)
