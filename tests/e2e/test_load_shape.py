"""The inference load's shape comes from the site's profile (`workloads.inference.load`): its users override
the scenario's "4 users" (the record keeps both), and its request mix reaches the endpoint — the twin's gateway
counts chat completions beside plain completions."""

from __future__ import annotations

import pytest
import requests

from tests.e2e.drill_helpers import drills, records, write_profile
from tests.e2e.test_guard_order import BUILTIN

pytestmark = pytest.mark.slow


def test_the_profiles_load_shape_drives_the_inference_drill(twin_factory, tmp_path):
    twin = twin_factory(scale=120.0)
    text = BUILTIN.read_text().replace(
        "    load: {prompt_words: 8, max_tokens: 16}\n",
        "    load: {users: 3, spawn_rate: 3, prompt_words: 24, max_tokens: 32, chat_weight: 0.5}\n")
    assert "chat_weight" in text
    profile = write_profile(tmp_path / "shape.yaml", text)
    proc = drills("run", "-m", "kill_one", "--profile", profile, "--twin-state", str(twin.state_dir), "--no-html",
                  "--reports", str(tmp_path / "r"), "--run-id", "shape", timeout=600)
    (rec,) = records(tmp_path / "r" / "shape")
    assert proc.returncode == 0, (proc.stdout[-2000:], rec["reason"])
    shape = rec["details"]["load_shape"]
    assert (shape["users"], shape["users_source"], shape["feature_users"]) == (3, "site profile", 4)
    assert (shape["prompt_words"], shape["max_tokens"], shape["chat_weight"]) == (24, 32, 0.5)
    counts = requests.get(f"{twin.info['gateway']}/twin/v1/requests", timeout=5).json()
    assert counts.get("POST /v1/chat/completions", 0) > 0 and counts.get("POST /v1/completions", 0) > 0, counts
