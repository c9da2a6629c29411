"""The local on-call receiver: Alertmanager webhooks to a JSON-lines file and readable lines."""
