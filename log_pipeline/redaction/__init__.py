"""Redaction's rules and the checks behind them; `log_pipeline.redact` applies them."""
