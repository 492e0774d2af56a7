"""The sandbox for model-written environments: pre-forked isolated workers (``pool``), the worker
process itself (``worker``), ``framing``, ``isolation`` layers, a cgroup per task (``cgroups``), episode ``session``s, parent-side
``grading``, contract ``adapters`` and the Gymnasium view (``gym_env``), the ordered ``validator``
checks, the ``scaffold`` base class a designer may build a game on (``textgame``), and the
``validate`` command (``cli``).

    from spade_engine.sandbox import SandboxPool
    with SandboxPool(config.sandbox) as pool, pool.open_session(source) as s:
        obs, info = s.reset(seed=0)
        obs, reward, terminated, truncated, info = s.step("\\\\boxed{42}")
"""

from .errors import EnvError, ErrorKind, IsolationError, PoolExhausted, SandboxCrash, SandboxError, StepTimeout
from .isolation import LAYERS, SandboxLayers
from .pool import SandboxPool, Task
from .session import Session

__all__ = [
    "SandboxPool",
    "Session",
    "SandboxEnv",
    "Task",
    "SandboxError",
    "StepTimeout",
    "SandboxCrash",
    "EnvError",
    "IsolationError",
    "PoolExhausted",
    "ErrorKind",
    "LAYERS",
    "SandboxLayers",
]


def __getattr__(name: str):  # SandboxEnv imports gymnasium: only when asked for
    if name == "SandboxEnv":
        from .gym_env import SandboxEnv

        return SandboxEnv
    raise AttributeError(name)
