"""Issuing one process's share of a plan: the issuer and its public bookkeeping
(:class:`~pytest_llmperf.loadgen.issue.book.IssueBook`), open loop, closed loop and
conversation turns as strategies over it, pacing, the concurrency cap, delivery,
and the in-process share run. Imports ``plan/`` below it, never ``scale_out/``."""
