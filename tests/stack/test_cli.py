"""The `tokenpulse` entry point: every registered command loads; only the chosen one is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stack import cli


def test_every_registered_command_and_bench_loads() -> None:
    cli.build_parser()  # without argv: every module, as tests and completion want
    for module_name, _ in [*cli.COMMANDS.values(), *(cli.benches() or {}).values()]:
        assert module_name in sys.modules
    args = cli.build_parser(["gateway"]).parse_args(["gateway", "--port", "1"])
    assert args._module is sys.modules["serving.gateway.cli"] and args.port == "1"


def test_a_missing_command_module_is_an_error_not_a_silent_skip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "ghost", ("tokenpulse.no_such_module", "gone"))
    with pytest.raises(ModuleNotFoundError):
        cli.build_parser()


def test_only_the_chosen_command_module_is_imported() -> None:
    code = (
        "import sys; from stack.cli import COMMANDS, benches, main\n"
        "try:\n    main(['gateway', '--help'])\nexcept SystemExit:\n    pass\n"
        "others = [m for m, _ in [*COMMANDS.values(), *benches().values()] if m in sys.modules]\n"
        "print('LOADED=' + ','.join(sorted(others)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED=serving.gateway.cli"


def test_without_the_development_tools_bench_says_how_to_get_them() -> None:
    # the wheel and the image have no devtools package: hide it the way a missing package looks
    code = (
        "import sys; sys.modules['devtools'] = None\n"
        "from stack.cli import main\n"
        "print('RC=%d' % main(['bench', 'model']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "RC=2", done.stderr
    assert "development tools" in done.stderr and "make venv" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_dev_venvs_tokenpulse_script_offers_the_benches(tmp_path: Path) -> None:
    # the console script, run from elsewhere: only the venv's checkout path makes devtools found
    script = Path(sys.executable).with_name("tokenpulse")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(script), "bench", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("model", "gateway", "pipeline"):
        assert f"    {name} " in done.stdout
