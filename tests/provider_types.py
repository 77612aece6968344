"""NeMo Gym's provider types: the real ones when ``nemo-gym`` is installed (``nox -s nemo-gym``
requires them, ``NEMO_GYM_REQUIRE_NEMO_GYM=1``), else field-for-field copies of them (0.4.0)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

try:
    from nemo_gym.sandbox.providers.base import SandboxExecResult, SandboxHandle, SandboxSpec

    REAL = True
except ImportError:
    if os.environ.get("NEMO_GYM_REQUIRE_NEMO_GYM") == "1":
        raise
    REAL = False

    @dataclass(frozen=True)
    class SandboxExecResult:  # type: ignore[no-redef]
        stdout: Optional[str]
        stderr: Optional[str]
        return_code: int
        error_type: Optional[str] = None

    @dataclass
    class SandboxHandle:  # type: ignore[no-redef]
        sandbox_id: str
        provider_name: str
        raw: Any

    @dataclass(frozen=True)
    class SandboxSpec:  # type: ignore[no-redef]
        image: Optional[str] = None
        workdir: Optional[str] = None
        env: Dict[str, str] = field(default_factory=dict)
        resources: Any = None
        provider_options: Dict[str, Any] = field(default_factory=dict)


__all__ = ["REAL", "SandboxExecResult", "SandboxHandle", "SandboxSpec"]
