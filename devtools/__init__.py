"""Development tools, never in the wheel or the image: benches, stand-ins, the test stack.

A checkout has them; `tokenpulse bench` offers them when this package is importable.
"""
