"""TokenPulse: observability and SRE toolkit around a TF Serving text-generation service."""

__version__ = "0.1.0"
