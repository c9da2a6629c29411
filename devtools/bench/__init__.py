"""`tokenpulse bench <name>`: benchmarks that print figures and ratios, never run by the runtime."""
