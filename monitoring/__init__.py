"""Monitoring as code: the mixin config and generators of rules, scrape and Alertmanager files."""
