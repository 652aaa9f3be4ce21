from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from commbench.tasks.data import provision_fashion_mnist

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Fashion-MNIST provisioned once from Debian's package into a private root."""
    root = tmp_path_factory.mktemp("data")
    provision_fashion_mnist(root)
    return root


def commbench(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real command line, in a child process: exit codes and stderr as a user sees them."""
    return subprocess.run([sys.executable, "-m", "commbench", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)
