"""The gateway: TokenPulse's public generation API in front of TensorFlow Serving's REST API.

A light process (aiohttp, no TensorFlow). `app.Gateway` wires the pieces: `keys` (hashed API
keys), `ratelimit` (per-key request/token buckets), `admission` (bounded concurrency and wait),
`breaker` (upstream circuit breaker), `routing` (label → version, sticky canary), `upstream` (REST
client), `handler` (the one request handler) under the sibling endpoints `native`, `completions`
and `chat` (over `protocol`'s shared pieces and chunk-stream base), `models`, `feedback` and
`probes`; `drain` (SIGTERM), `signals` + `metrics` (quality signals and Prometheus), `sink`
(samples for the log pipeline). `server.run(settings)` starts it.
"""
