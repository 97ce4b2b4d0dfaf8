"""A write's stamp: the drill's window around it narrowed by the server's `Date` second (drills/core/stamp.py)."""

from email.utils import formatdate

from drills.core.stamp import _date_of, narrow


class _Answer:  # the headers of an answer, as urllib3 and the kubernetes client's RESTResponse carry them
    def __init__(self, headers: dict) -> None:
        self.headers = headers


def test_a_wide_window_is_cut_to_the_servers_second():
    # at 600x under load: the request left 20 cluster s before the twin handled it at 1000.4
    assert narrow((980.2, 1000.6), 1000.0) == (1000.0, 1000.6)


def test_a_window_inside_the_second_stands():
    assert narrow((1000.2, 1000.25), 1000.0) == (1000.2, 1000.25)


def test_a_server_clock_that_disagrees_leaves_the_window():
    assert narrow((1000.2, 1000.25), 990.0) == (1000.2, 1000.25)
    assert narrow((1000.2, 1000.25), None) == (1000.2, 1000.25)


def test_the_date_header_is_read_in_whole_seconds():
    assert _date_of(_Answer({"Date": formatdate(1796489181.9, usegmt=True)})) == 1796489181.0
    assert _date_of(_Answer({})) is None
    assert _date_of(_Answer({"Date": "not a date"})) is None
