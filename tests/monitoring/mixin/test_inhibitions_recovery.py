"""The recovery holds (monitoring/mixin/holds.py) as Alertmanager applies them, in the real binary.

When a hold starts and ends is Prometheus's business (alerts/tests/restarts.test.yml); here: the
inhibit rules use the holds the mixin defines, and a hold never hides the crash-loop page, which
may fire while one holds (a loop whose first outage paged as TfServingDown).
"""

from __future__ import annotations

from monitoring.mixin import alertmanager
from monitoring.mixin.holds import down_holds, unavailable_holds
from monitoring.mixin.promql import NORMAL
from tests.monitoring.mixin.test_inhibitions import (  # the real Alertmanager and its helpers
    BURN,
    FLAPPING,
    FLEET,
    FLEET_UNAVAILABLE,
    RECENTLY,
    UNAVAILABLE,
    _suppressed,
    am_url,  # noqa: F401 - the module's Alertmanager fixture
    pytestmark,  # noqa: F401 - skipped without prometheus-alertmanager
)


def test_the_inhibit_rules_hold_with_the_holds_the_mixin_defines() -> None:
    holds = {a.alertname for a in down_holds(NORMAL) + unavailable_holds(NORMAL)}
    sources = " ".join(str(r["source_matchers"]) for r in alertmanager.inhibit_rules())
    assert holds == {h for h in holds if h in sources}
    assert len(holds) == 4


def test_no_hold_hides_a_crash_loop_page(am_url: str) -> None:  # noqa: F811
    holds = (RECENTLY, FLEET, {**UNAVAILABLE, "replica": "0"}, FLEET_UNAVAILABLE)
    assert _suppressed(am_url, *holds, {**FLAPPING, "replica": "0"}, want=set()) == set()
    # ... while the burn the loop's outages leave is held (its page is the loop's)
    burn = {BURN["alertname"]}
    assert _suppressed(am_url, FLEET, FLAPPING, BURN, want=burn) == burn
