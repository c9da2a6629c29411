"""The TokenPulse mixin: one config (`config.py`) and the generators that turn it into files."""
