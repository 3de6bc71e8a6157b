"""Ordered sends: the sends of one connection (sender, receiver, lane) marked ``ordered`` move
their bytes one after another, the next starting when the previous one's last byte has left,
so each one's latency tail overlaps the next one's bytes; other traffic still shares links
max-min fairly with the one moving."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.timing import TimingEngine
from collsim.hardware.topology import fully_connected, switch
from collsim.program import Job, Parallel, Recv, Send

LATENCY, BANDWIDTH = 1.5e-6, 20e9  # per link: a route on the switch is two links


def finishes(programs, p: int = 2, machine=None) -> list[float]:
    machine = machine or switch("s", p, LATENCY, BANDWIDTH)
    return TimingEngine(machine, list(range(p)), Job("broadcast", p, 1), programs).run().finish


def by_slots(counts: list[int], ordered: bool, lanes: list[int] | None = None):
    """Rank 0 sends message i of ``counts[i]`` elements to rank 1, each from its own thread,
    all posted at once; rank 1 receives each in its own thread."""
    lanes = lanes or [0] * len(counts)

    def program(rank, job):
        def one(i):
            if rank == 0:
                yield Send(1, i, 0, counts[i], lane=lanes[i], ordered=ordered)
            else:
                yield Recv(0, i, 0, counts[i])
        yield Parallel([one(i) for i in range(len(counts))])
    return program


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.integers(1, 10**6), min_size=1, max_size=6))
def test_ordered_sends_go_one_after_another_and_overlap_their_latencies(counts):
    # Message i's last byte leaves when all bytes up to it have; it arrives 2 latencies later.
    alpha, beta = 2 * LATENCY, 4 / BANDWIDTH
    run = TimingEngine(switch("s", 2, LATENCY, BANDWIDTH), [0, 1], Job("broadcast", 2, 1),
                       by_slots(counts, True))
    result = run.run()
    assert result.finish[0] == pytest.approx(alpha + sum(counts) * beta, rel=1e-9)
    assert result.transfers == len(counts)


def test_unordered_sends_share_the_link_and_arrive_together():
    counts = [1000, 1000, 1000]
    alpha, beta = 2 * LATENCY, 4 / BANDWIDTH
    ordered, shared = finishes(by_slots(counts, True)), finishes(by_slots(counts, False))
    assert shared[0] == pytest.approx(alpha + 3000 * beta, rel=1e-9)
    assert ordered[0] == pytest.approx(shared[0], rel=1e-9)  # the last one: same bytes


def test_each_ordered_send_completes_when_its_own_bytes_arrive():
    # Three messages in turn: the first is delivered at alpha + n·beta, not with the last.
    alpha, beta, n = 2 * LATENCY, 4 / BANDWIDTH, 5000

    def program(rank, job):
        if rank == 0:
            yield Parallel([iter([Send(1, i, 0, n, ordered=True)]) for i in range(3)])
        elif rank == 1:
            yield Recv(0, 0, 0, n)
            # The time rank 1 got the first message, plus one hop of 4 bytes to rank 2.
            yield (Send(2, 9, 0, 1), Recv(0, 1, 0, n), Recv(0, 2, 0, n))
        else:
            yield Recv(1, 9, 0, 1)
    for_three = finishes(program, 3)
    first = alpha + n * beta
    assert for_three[2] == pytest.approx(first + alpha + beta, rel=1e-9)


def test_lanes_are_separate_connections():
    # The same two ranks on two lanes: two lines, so the messages share the link.
    counts = [2000, 2000]
    two_lanes = finishes(by_slots(counts, True, lanes=[0, 1]))
    shared = finishes(by_slots(counts, False))
    assert two_lanes[0] == pytest.approx(shared[0], rel=1e-9)


def test_the_moving_send_shares_links_with_other_traffic():
    # Rank 0 sends two ordered messages to rank 1 while rank 2 sends one message to rank 1
    # over rank 1's own link: on that link the moving ordered message and rank 2's share
    # fairly, so the 3n bytes into rank 1 take 3n·beta, the ordered ones in turn.
    n = 4000
    mesh = switch("s", 3, LATENCY, BANDWIDTH)
    alpha, beta = 2 * LATENCY, 4 / BANDWIDTH

    def program(rank, job):
        if rank == 0:
            yield Parallel([iter([Send(1, i, 0, n, ordered=True)]) for i in range(2)])
        elif rank == 1:
            yield (Recv(0, 0, 0, n), Recv(0, 1, 0, n), Recv(2, 5, 0, n))
        else:
            yield Send(1, 5, 0, n)
    run = TimingEngine(mesh, [0, 1, 2], Job("broadcast", 3, 1), program).run()
    assert run.finish[1] == pytest.approx(alpha + 3 * n * beta, rel=1e-9)
    # Rank 2's message shares with the first ordered one (2n at half rate), then is alone
    # against the second: it is done after 2n·beta.
    assert run.finish[2] == pytest.approx(alpha + 2 * n * beta, rel=1e-9)


def test_an_empty_ordered_send_passes_the_line_on():
    def program(rank, job):
        if rank == 0:
            yield Parallel([iter([Send(1, 0, 0, 0, ordered=True)]),
                            iter([Send(1, 1, 0, 100, ordered=True)])])
        else:
            yield (Recv(0, 0, 0, 0), Recv(0, 1, 0, 100))
    machine = fully_connected("m", 2, LATENCY, BANDWIDTH)
    assert finishes(program, 2, machine)[1] == pytest.approx(LATENCY + 400 / BANDWIDTH,
                                                              rel=1e-9)
