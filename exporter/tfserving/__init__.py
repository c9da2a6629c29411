"""TF Serving behind the exporter: REST client, served models, status tracker, canary runner.

Like `exporter/nvml/`, these are the data sources; the collectors in `exporter/collectors/` only
read them. The protocol itself (config text format, status and predict documents, errors) lives
in `tokenpulse.tfserving`; this package adds the exporter's transport (urllib) and state.
"""
