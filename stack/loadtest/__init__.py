"""`tokenpulse loadtest`: open- and closed-loop load, SLO-bounded capacity search, HTML reports.

Modules: settings (flags), arrivals (intended send times), workload (prompts, keys), client (one
request, per route), engine (the loops, the generator's own health, progress), stats (client-side
figures), prom (server-side figures), findmax, report, compare, scenario (the seed's story), cli.
Nothing here imports TensorFlow at import time; only `naive_server` needs it, in its own process.
"""
