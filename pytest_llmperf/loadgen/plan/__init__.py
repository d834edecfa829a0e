"""What a run sends and when, decided before the clock starts: the
:class:`~pytest_llmperf.loadgen.plan.planner.RunPlan` (built once from a spec,
and once per worker share), arrival schedules and the sample order. Imports
nothing else of ``loadgen/``."""
