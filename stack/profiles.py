"""Named profiles of a stack: the pace and rule set a kind of run wants, written once.

`tokenpulse up --profile drill` takes the drill profile's values where no flag or environment
variable sets them (a flag still wins); the test stack (devtools/stack.py) builds its StackConfig
on the `test` profile. Each key is a field of both StackConfig and `up`'s settings, so a profile
means the same in both (tests/stack/test_profiles.py checks it).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

ProfileName = Literal["default", "drill", "test"]

# Fast scrapes and evaluations with the compressed rules (windows /60), fake GPUs, every poll at a
# second (stack.config.FAST_POLLS).
_FAST: dict[str, Any] = {
    "rules": "compressed",
    "scrape_interval": "2s",  # a scrape slowed by a busy machine must not look like a down target
    "evaluation_interval": "1s",
    "gpu_backend": "fake",
    "fast_polls": True,
}

PROFILES: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "default": MappingProxyType({}),
    # `tokenpulse drill`: group interval 1 s, so a failing receiver fails every second, which the
    # compressed 5 s rate sees; the Watchdog every 5 s, so its silence shows in seconds; a 32 KiB
    # spool fills in seconds while the shipper is stopped and never while it runs; a restart 20 s
    # after an exit (the outage page first); the gateway's upstream through a fault proxy. The
    # shipper's fault proxy needs an Elasticsearch: `--es-url URL --es-fault-proxy-port 8512`.
    "drill": MappingProxyType({
        **_FAST, "group_wait": "5s", "group_interval": "1s", "watchdog_interval": "5s",
        "restart_delay_s": 20.0, "fault_proxy_port": 8511, "spool_cap_bytes": 32768,
    }),
    # tests: the first notification after 10 s (an inhibiting alert, e.g. model server down,
    # arrives before its symptoms' group flushes), updates such as resolved 3 s apart, a canary
    # run every 5 s, and 120 s for a component to start on a busy machine. Rules every 2 s: a test
    # stack's Prometheus spends ~94 % of its CPU evaluating the 140 compressed rules, and at 1 s
    # that was 0.15 of a core per stack five minutes in (0.08 at 2 s: one stack, reloaded with
    # each, a minute apiece). The drills keep 1 s (their holds are tuned to it:
    # alerts/tests/compressed_restarts.test.yml).
    "test": MappingProxyType({
        **_FAST, "evaluation_interval": "2s", "group_wait": "10s", "group_interval": "3s",
        "repeat_interval": "1h",
        "canary_interval_s": 5.0, "start_timeout_s": 120.0,
    }),
})  # fmt: skip


def profile(name: str) -> Mapping[str, Any]:
    """The values of one profile; ValueError naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None
