"""`tokenpulse rollout`: version labels and the canary weight on the running stack (see cli.py)."""
