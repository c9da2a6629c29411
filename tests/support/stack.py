"""The modules that share the one alerting test stack (tests/conftest.py's `shared_stack`).

Under pytest-xdist they run on one worker, one after the other, so the stack starts once. The
grouping is by module path: pytest 9 keeps a node's id structured, so xdist's own `xdist_group`
suffix never reaches the scheduler. Collection fails for a module that uses the fixture without
being listed here.
"""

from __future__ import annotations

SHARED_STACK = "shared-stack"
SHARED_STACK_MODULES = (
    "tests/alerts/test_e2e.py",  # first: its "healthy stack notifies nobody" wants a quiet stack
    "tests/monitoring/mixin/dashboards/test_live.py",
    "tests/alerts/test_runbook_commands.py",  # puts labels, weight and silences back after
)


# The modules that share the drill stack (tests/stack/conftest.py's `drill_stack`), likewise.
DRILL_STACK = "drill-stack"
DRILL_STACK_MODULES = ("tests/stack/test_drill.py", "tests/stack/test_soak.py")


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the shared stack's group."""
    module = nodeid.split("::", 1)[0]
    if module in DRILL_STACK_MODULES:
        return DRILL_STACK
    return SHARED_STACK if module in SHARED_STACK_MODULES else module
