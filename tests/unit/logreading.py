"""A whole list of log lines through one LogReader, closed (the unit tests of the fail-safe classes)."""

from drills.measure.logread import LogReader

__all__ = ["read_lines"]


def read_lines(lines: list[str]) -> LogReader:
    reader = LogReader()
    for line in lines:
        reader.feed(line)
    reader.close()
    return reader
