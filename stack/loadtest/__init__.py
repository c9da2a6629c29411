"""`tokenpulse loadtest`: open- and closed-loop load, SLO-bounded capacity search, HTML reports.

Modules: settings (flags), arrivals (intended send times), workload (prompts, keys), client (one
request, per route), engine (the loops, the generator's own health, progress), stats (client-side
figures and the quantile), prom (server-side figures: the one /metrics reader), procstat (process
CPU), measure (one run, both sides), findmax, report, compare, scenario (the seed's story),
runner, cli. The benches (`tokenpulse bench`) run their arms on the same loops and readers.
Nothing here imports TensorFlow at import time; only `naive_server` needs it, in its own process.
"""
