"""Held-out evaluation: ``spade-engine eval``, recorded as ``EvaluationCompleted`` events.

* :mod:`.seeds`      the disjoint seed ranges of evaluation and training (rule ``eval-v1``)
* :mod:`.suites`     ``reasoning-gym:...`` and ``archive:RUN``: parsing and their items
* :mod:`.scoring`    answer extraction, the tasks' own verifiers, the Wilson interval
* :mod:`.runner`     running a policy on the items (batched; archive through the sandbox)
* :mod:`.checkpoint` ``--run R --version V``: the PolicyUpdated checkpoint to load
* :mod:`.recording`  where results are recorded, and reading them back
* :mod:`.periodic`   the trainer's evaluation of its new weights every ``eval.every`` updates
* :mod:`.cli`        the command
"""
