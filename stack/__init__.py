"""Stack layer: `tokenpulse` CLI, `up` and the process launcher (the runtime never imports it)."""
