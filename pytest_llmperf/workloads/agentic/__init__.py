"""Agentic conversations: traces of coding agents (Weka, the project's JSON Lines,
OpenTelemetry GenAI spans) and synthetic ones, replayed as trees of conversations
(:mod:`pytest_llmperf.workloads.agent_script`)."""
