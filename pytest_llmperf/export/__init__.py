"""A finished session's results sent where teams already look: OpenTelemetry's GenAI
metrics and spans over OTLP, MLflow runs (docs/export.md). Works from the JSON report's
dict and the runs' event logs, after the session: nothing here runs during load."""

__all__: list[str] = []
