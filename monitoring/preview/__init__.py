"""PNG previews of the dashboards from Prometheus data, for machines without Grafana."""
