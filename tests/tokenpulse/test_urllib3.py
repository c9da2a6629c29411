"""urllib3 stays urllib3.

grafana-client's niquests brings urllib3-future, whose wheel replaces urllib3 in place and breaks
requests and elastic-transport; `make venv` builds it from source to install beside urllib3.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import urllib3


def test_urllib3_is_the_pinned_urllib3_not_the_fork() -> None:
    assert urllib3.__version__ == importlib.metadata.version("urllib3")
    site = Path(urllib3.__file__).parents[1]
    assert not list(site.glob("urllib3_future*.pth"))


def test_niquests_uses_the_fork_under_its_own_name() -> None:
    import niquests  # noqa: F401 - import must work beside the real urllib3
    import urllib3_future

    assert urllib3_future.__version__ == importlib.metadata.version("urllib3-future")
