"""The protocol package must stay light: no TensorFlow, TF Serving, gRPC or protobuf."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_loads_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "import tokenpulse.tfserving.config, tokenpulse.tfserving.status\n"
        "import tokenpulse.tfserving.predict, tokenpulse.tfserving.errors\n"
        "import tokenpulse.tfserving.contract\n"
        "heavy = ('tensorflow', 'tensorflow_serving', 'grpc', 'google.protobuf')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
