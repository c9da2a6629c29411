"""Stand-ins for what cannot run here (TF Serving, Elasticsearch, Grafana), on their protocols."""
