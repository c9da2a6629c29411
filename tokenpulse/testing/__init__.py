"""Test and benchmark support: component launchers and protocol stand-ins, never imported by the
runtime (except `tokenpulse up`, which starts the stack with the same launchers)."""
