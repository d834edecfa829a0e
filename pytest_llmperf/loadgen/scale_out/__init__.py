"""Where a run is issued: the dispatcher (in-process, worker processes or Ray actors)
and the worker and Ray modules. On top of ``issue/`` and ``plan/``; the run
(:mod:`~pytest_llmperf.loadgen.run`) reaches it only through the dispatcher."""
