"""``spade-engine compare RUN_A RUN_B``: held-out accuracy (paired on items), frontier occupancy
and compute of two runs side by side.

* :mod:`.summary` the numbers, from the two logs
* :mod:`.report`  the HTML page (plotly, offline)
* :mod:`.cli`     the command (table, ``--json``, ``--html``)
"""
