"""The example suites' top level.

``methodology/`` has its own ``pytest.ini`` (the simulator's ``tiny``
profile, sized so saturation and preemption show on a laptop); pytest reads
one ini file per session, so that directory runs as a session of its own:
``pytest example_suites/methodology``.
"""

collect_ignore = ["methodology"]
