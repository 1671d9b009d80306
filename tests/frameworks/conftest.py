"""Session fixtures for the frameworks suite: the SDK suite's own (the mock
upstream `examples/mock_upstream` and the release `switchboard` on loopback
ports, the same test catalog), loaded from tests/sdk/conftest.py so both
suites drive one setup. This suite has its own virtualenv: the frameworks
pin an older OpenAI SDK than the SDK suite tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[1] / "sdk"
sys.path.insert(0, str(SDK))

_spec = importlib.util.spec_from_file_location("sdk_conftest", SDK / "conftest.py")
sdk_conftest = importlib.util.module_from_spec(_spec)
sys.modules["sdk_conftest"] = sdk_conftest  # dataclasses look their module up here
_spec.loader.exec_module(sdk_conftest)

# Fixtures, re-exported: pytest finds them by name in this module.
mock = sdk_conftest.mock
gateway = sdk_conftest.gateway
_needs_responses = sdk_conftest._needs_responses
