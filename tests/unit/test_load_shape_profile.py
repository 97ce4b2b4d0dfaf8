"""The inference load's shape in the profile (`workloads.inference.load`): defaults keep today's load, and a
shape that cannot work is one line naming the field."""

import pytest

from drills.core.errors import InvalidProfile
from drills.profile.model import load_target, parse_profile


def test_the_builtin_profile_keeps_the_scenarios_users_and_a_small_prompt():
    shape = load_target(None).workloads.inference.load
    assert shape.users is None and shape.spawn_rate is None  # the scenario's "N users", all at once
    assert (shape.prompt_words, shape.max_tokens, shape.chat_weight) == (8, 16, 0.0)


@pytest.mark.parametrize("load, field", [("{users: 0}", "users"), ("{chat_weight: 1.5}", "chat_weight"),
                                         ("{wait_min_s: 2, wait_max_s: 1}", "wait_max_s"),
                                         ("{max_tokens: 0}", "max_tokens"), ("{rps: 10}", "rps")])
def test_a_bad_load_shape_is_one_line_naming_the_field(load, field):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(f"workloads: {{inference: {{load: {load}}}}}")
    assert "\n" not in str(err.value) and field in str(err.value)
