"""Issuing one process's share of a plan: the share run
(:class:`~pytest_llmperf.loadgen.issue.local.ShareRun`), its public bookkeeping
(:class:`~pytest_llmperf.loadgen.issue.book.IssueBook`, which holds the plan and the
stop reason), the strategies over it (open loop, closed loop, conversations: one
function each, looked up once from the plan's strategy), pacing, the concurrency cap,
delivery and the drain. Imports ``plan/`` below it, never ``scale_out/``."""
