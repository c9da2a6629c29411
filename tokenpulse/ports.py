"""The default port of every component: one home, read by each component's settings, `up`, the
generated Prometheus config and the compose file's test."""

from __future__ import annotations

MODELSERVER_GRPC = 8500  # TF Serving's own defaults
MODELSERVER_REST = 8501
GATEWAY = 8080
EXPORTER = 9410
SHIPPER = 9411
ONCALL = 9095
PROMETHEUS = 9090
ALERTMANAGER = 9093
# `up --ha`: the second Prometheus and Alertmanager, and the Alertmanagers' gossip (9094 is
# Alertmanager's own default cluster port)
PROMETHEUS_2 = 9091
ALERTMANAGER_2 = 9097
ALERTMANAGER_CLUSTER = 9094
ALERTMANAGER_2_CLUSTER = 9098
# `tokenpulse model train --metrics-port`: the training job's /metrics (compose's `training`
# service, the Kubernetes training pods); the supervisor's local worker i serves it + i
TRAINING_METRICS = 9412
ELASTICSEARCH = 9200
