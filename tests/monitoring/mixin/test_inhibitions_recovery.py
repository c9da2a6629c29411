"""The recovery holds (monitoring/mixin/holds.py) as Alertmanager applies them, in the real binary.

When a hold starts and ends is Prometheus's business (alerts/tests/restarts.test.yml); here: the
inhibit rules use the holds the mixin defines, and a hold never hides the crash-loop page, which
may fire while one holds (a loop whose first outage paged as TfServingDown).
"""

from __future__ import annotations

import json
import time
import urllib.request

from monitoring.mixin import alertmanager
from monitoring.mixin.alerts.holds import down_holds, unavailable_holds
from monitoring.mixin.config import DEFAULT as config
from monitoring.mixin.promql import NORMAL
from tests.monitoring.mixin.test_inhibitions import (  # the real Alertmanager and its helpers
    BURN,
    FLAPPING,
    FLEET,
    FLEET_UNAVAILABLE,
    RECENTLY,
    UNAVAILABLE,
    _post,
    _suppressed,
    am_url,  # noqa: F401 - the module's Alertmanager fixture
    pytestmark,  # noqa: F401 - skipped without prometheus-alertmanager
)


def test_the_inhibit_rules_hold_with_the_holds_the_mixin_defines() -> None:
    alerts = down_holds(config, NORMAL) + unavailable_holds(config, NORMAL)
    holds = {config.alertname(a.name) for a in alerts}
    sources = " ".join(str(r["source_matchers"]) for r in alertmanager.inhibit_rules(config))
    assert holds == {h for h in holds if h in sources}
    assert len(holds) == 4


def test_no_hold_hides_a_crash_loop_page(am_url: str) -> None:  # noqa: F811
    holds = (RECENTLY, FLEET, {**UNAVAILABLE, "replica": "0"}, FLEET_UNAVAILABLE)
    assert _suppressed(am_url, *holds, {**FLAPPING, "replica": "0"}, want=set()) == set()
    # ... while the burn the loop's outages leave is held (its page is the loop's)
    burn = {BURN["alertname"]}
    assert _suppressed(am_url, FLEET, FLAPPING, BURN, want=burn) == burn


def _states(url: str, case: str, names: set[str], want: dict[str, str]) -> dict[str, str]:
    """The state of each alert of `case` named in `names`, once it is `want` or after 3 s."""
    deadline = time.monotonic() + 3.0
    while True:
        query = f"{url}/api/v2/alerts?filter=case%3D%22{case}%22"
        with urllib.request.urlopen(query, timeout=10) as resp:
            doc = json.load(resp)
        got = {
            a["labels"]["alertname"]: a["status"]["state"]
            for a in doc
            if a["labels"]["alertname"] in names
        }
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_a_crash_loop_pages_once_through_its_hold(am_url: str) -> None:  # noqa: F811
    # one model server (no replica label): the loop pages, its burn is the loop's; the loop
    # ends and its page resolves while the hold it started fires: the burn its outages left in
    # the windows stays silenced
    case = {"case": "crash-loop-then-hold"}
    flapping, burn, hold = ({**a, **case} for a in (FLAPPING, BURN, RECENTLY))
    name = BURN["alertname"]
    try:
        _post(am_url, [flapping, burn], 600)
        time.sleep(1.0)  # the inhibitor learns of new sources asynchronously
        assert _states(am_url, case["case"], {name}, {name: "suppressed"}) == {name: "suppressed"}
        _post(am_url, [hold], 600)
        time.sleep(1.0)
        _post(am_url, [flapping], -1)
        time.sleep(1.0)
        assert _states(am_url, case["case"], {name}, {name: "suppressed"}) == {name: "suppressed"}
    finally:
        _post(am_url, [flapping, burn, hold], -1)
