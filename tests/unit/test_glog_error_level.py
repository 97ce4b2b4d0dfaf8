"""ERROR-level glog / c10 lines (`E0912 …]`, `[E socket.cpp:793]`, torchrun's `[rank0]:[E1105 …]`) fail safe: unknown,
unless a classified error of the same process (the same stream and launcher rank) is within CONSEQUENCE_S of it (by
the records' times; in a log without times, within CONSEQUENCE_RECORDS records) — PyTorch prints the consequences of a
failure the readers classify in the same burst, and a consequence must not hold a window inconclusive."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from drills.measure.logread import LogReader

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
# source: tests/data/real/logs (the watchdog's burst, PyTorch 2.0's ProcessGroupNCCL.cpp shapes)
WATCHDOG = ("[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=158046, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800414 milliseconds before timing out.")
SOME_FAILED = ("[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or timed out. Due to the "
               "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.")
TAKE_DOWN = "[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data inconsistency, we are taking the entire process down."
# c10d's TCPStore client (torch/csrc/distributed/c10d/socket.cpp), a failure of its own
SOCKET = ("[E socket.cpp:793] [c10d] The client socket has timed out after 900s while trying to connect to "
          "(10.0.0.1, 29500).")


def stamp(s: float, line: str, rank: int | None = None) -> str:
    prefix = f"[rank{rank}]:" if rank is not None else ""
    return f"{(T0 + timedelta(seconds=s)).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {prefix}{line}"


def unknown(lines: list[str]) -> list[str]:
    r = LogReader()
    for line in lines:
        r.feed(line)
    r.close()
    return [body for _, body, _ in r.unknown]


def test_an_error_level_line_alone_is_unknown():
    assert unknown([stamp(0, SOCKET)]) == [SOCKET]
    glog = "E0912 23:44:51.552719 2536982 pjrt_stream_executor_client.cc:3008] Execution of replica 0 failed: INTERNAL"
    assert unknown([glog]) == [glog]


def test_the_watchdogs_burst_is_its_classified_errors_consequence_before_or_after_it():
    assert unknown([stamp(0, WATCHDOG), stamp(0.001, SOME_FAILED), stamp(0.002, TAKE_DOWN)]) == []
    assert unknown([stamp(0, SOME_FAILED), stamp(0.5, WATCHDOG)]) == []  # printed first, withdrawn when it comes


def test_the_same_line_far_from_the_error_or_from_another_rank_is_not_its_consequence():
    assert unknown([stamp(0, WATCHDOG), stamp(600, SOCKET)]) == [SOCKET]  # ten minutes later: a failure of its own
    got = unknown([stamp(0, WATCHDOG, rank=1), stamp(0.001, SOME_FAILED, rank=3)])
    assert got == [SOME_FAILED]  # rank 3's line is not rank 1's watchdog's consequence


def test_without_times_the_records_between_decide():
    assert unknown([WATCHDOG, SOME_FAILED, TAKE_DOWN]) == []
    assert unknown([WATCHDOG, *[f"step {i}" for i in range(20)], SOCKET]) == [SOCKET]


def test_c10s_unpadded_month_stamp_and_torchxs_prefix_are_error_level_lines_too():
    # c10d-e521-socket-1023-tcpstore-318-timed-out-600000ms-exception-raised-from.log (2.x: `E521`, May 21)
    e521 = ("[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while "
            "trying to connect to (172.18.21.4, 37907).")
    assert unknown([e521]) == [e521]
    # torchx-trainer-prefix-w-socket-558-then-e-socket-610-any-network-address.log: `trainer/0 [1]:` peeled, rank 1
    body = "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network address of (05, 40323)."
    r = LogReader()
    r.feed(f"trainer/0 [1]:{body}")
    assert [u[1] for u in r.unknown] == [body]
    # a WARNING (c10d-w427-socket-752-failed-to-connect-warning-only.log) is no error
    assert unknown(["[W427 01:04:16.149509694 socket.cpp:752] [c10d] The client socket has failed to connect to "
                    "[::ffff:198.18.0.1]:3254 (errno: 110 - Connection timed out)."]) == []
