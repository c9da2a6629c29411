"""Grafana: provisioning files (`provisioning/`), and pushing dashboards and annotations by API."""
