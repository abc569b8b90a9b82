"""The simulator checked against the real control planes it stands in for.

One job list (``jobs.py``) is played twice, on the same clock: straight into a real
control plane, the broker not in the path (``slurm.py``: ``sbatch`` of ``sleep`` jobs on a
partition of their own), and into the simulator built from that same cluster's inventory
and local limits as its backend reads them (``simulated.py``).  ``compare.py`` lines the two
up per job: start order, start-time error, which jobs started ahead of an earlier one (the
local scheduler's backfill), and the queue reason at each sampled instant.
``manage.py calibrate`` runs it; docs/simulator.md keeps the tables.
"""
