"""Trace replay: a job trace through the fleet simulator, our placement presets (via the
broker's real services) and baseline schedulers, scored the same way.

    manage.py replay_trace TRACE --fleet FILE --policies default,cost,first-fit,... \
        --seed 7 --time-compress 20

Modules: ``trace`` (reader), ``synth`` (tenants and gangs where a trace lacks them),
``gpu_map`` (trace GPU types -> policy classes), ``jobs`` (what is replayed, time
handling), ``loop`` (the event loop), ``tracker`` (ground truth), ``simview`` (the
simulator as the harness sees it), ``baselines``, ``broker_strategy``, ``metrics``,
``runner``, ``table``.  See docs/replay.md.
"""
