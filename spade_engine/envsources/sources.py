"""The environment sources a run's engine proposes from instead of the designer.

Each source is the engine's ``proposer`` (:attr:`spade_engine.engine.loop.Engine.proposer`): slot
``index`` -> the ``EnvironmentProposed`` of that slot, a pure function of the source and the index
(so a resumed run proposes the same environments). Sources cycle: slot ``index`` takes item
``index mod len(items)``, so ``loop.max_envs`` beyond the pool makes further passes over it.

* :class:`PoolSource`: a fixed pool of items, each already wrapped as an environment:
  reasoning-gym items (:mod:`.rgpool`) or textarena game instances (:mod:`.textarena_pool`);
  ``skill`` is the task (or game), ``document`` names the item (``task/seed``, the id format
  evaluation items use) and its generator, ``designer`` is ``<kind>:<task>``
  (``reasoning-gym:gcd``, ``textarena:Mastermind-v0``);
* :class:`ArchiveSource`: a recorded run's accepted environments (:mod:`.archive`): code,
  skill, difficulty and document as recorded, ``designer`` ``archive:<run>/<env id>``.

Neither writes a ``generation``: there are no designer tokens, so the trainer trains the agent
only (the designer samples are counted as untokenised).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..engine.pipeline import env_id_for
from ..events.catalogue import DocumentRef, EnvironmentProposed

if TYPE_CHECKING:
    from ..engine.loop import Engine

__all__ = ["EnvSource", "ItemPool", "PoolSource", "ArchiveSource"]


class EnvSource(Protocol):
    """A fixed source of environments: the engine's proposer (``propose``), what it is
    (``describe``, recorded with the run) and what it holds (``close``)."""

    def propose(self, engine: Engine, index: int) -> EnvironmentProposed:
        """The environment of slot ``index`` (a pure function of the source and the index)."""
        ...

    def describe(self) -> dict[str, Any]:
        ...

    def close(self) -> None:
        ...


class PoolItem(Protocol):
    """One wrapped item of a pool (:class:`~.rgpool.PoolItem`, :class:`~.textarena_pool.TextArenaItem`)."""

    @property
    def task(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def item_id(self) -> str: ...

    @property
    def code(self) -> str: ...

    def document(self, generator: str) -> DocumentRef: ...


class ItemPool(Protocol):
    """A pool of wrapped items (:class:`~.rgpool.Pool`, :class:`~.textarena_pool.TextArenaPool`)."""

    @property
    def generator(self) -> str: ...

    @property
    def items(self) -> Sequence[PoolItem]: ...

    def describe(self) -> dict[str, Any]: ...


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PoolSource:
    """Proposals from a pool of wrapped items (see the module docstring): a
    :class:`~.rgpool.Pool` or a :class:`~.textarena_pool.TextArenaPool`, whose items have
    ``task``, ``index``, ``item_id``, ``code`` and ``document(generator)``."""

    pool: ItemPool
    text: str

    def propose(self, engine: Engine, index: int) -> EnvironmentProposed:
        items = self.pool.items
        item = items[index % len(items)]
        return EnvironmentProposed(
            env_id=env_id_for(engine.run_id, index),
            skill=item.task,
            difficulty=0.5,
            code=item.code,
            code_sha256=_sha(item.code),
            policy_version=engine.ctx.policy.version,
            document=item.document(self.pool.generator),
            prompt=(f"fixed pool {self.text}: item {item.item_id} (index {item.index} of the task), "
                    f"pass {index // len(items) + 1} over {len(items)} items"),
            designer=f"{self.pool.describe()['kind']}:{item.task}",
        )

    def describe(self) -> dict[str, Any]:
        return {"source": self.text, **self.pool.describe()}

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class ArchiveSource:
    """Proposals replaying a recorded run's accepted environments (see the module docstring)."""

    run_id: str
    curriculum: list[EnvironmentProposed]

    def propose(self, engine: Engine, index: int) -> EnvironmentProposed:
        from .archive import replayed_proposal

        old = self.curriculum[index % len(self.curriculum)]
        return replayed_proposal(old, env_id=env_id_for(engine.run_id, index), policy_version=engine.ctx.policy.version,
                                 designer=f"archive:{self.run_id}/{old.env_id}")

    def describe(self) -> dict[str, Any]:
        return {"source": f"archive:{self.run_id}", "kind": "archive", "run": self.run_id, "items": len(self.curriculum)}

    def close(self) -> None:
        """Nothing to release."""
