"""NVML behind a backend protocol: a real pynvml implementation and a fake for tests and demos."""
