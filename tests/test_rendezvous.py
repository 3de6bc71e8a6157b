"""The rendezvous rule alone: sends and receives meet by (source, destination, tag), oldest
first, whichever side is posted first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collsim.engine.rendezvous import Rendezvous


def test_the_second_side_posted_gets_the_first_sides_item():
    meet = Rendezvous()
    assert meet.send((0, 1, 7), "send A") is None
    assert meet.recv((0, 1, 7), "recv A") == "send A"
    assert meet.recv((0, 1, 7), "recv B") is None
    assert meet.send((0, 1, 7), "send B") == "recv B"
    assert meet.sends == meet.recvs == {}  # matched keys leave the tables


def test_other_sources_destinations_and_tags_do_not_match():
    meet = Rendezvous()
    assert meet.send((0, 1, 7), "s") is None
    for key in [(1, 0, 7), (0, 2, 7), (0, 1, 8), (2, 1, 7)]:
        assert meet.recv(key, str(key)) is None
    # Each with the rank that posted it: the source of a send, the destination of a receive.
    assert sorted(meet.waiting()) == sorted(
        [(0, "s"), (0, "(1, 0, 7)"), (2, "(0, 2, 7)"), (1, "(0, 1, 8)"), (1, "(2, 1, 7)")])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), max_size=40))
def test_messages_under_one_key_meet_in_posting_order(posts):
    """The k-th send under a key meets the k-th receive under it, whatever the
    interleaving of the two sides."""
    meet = Rendezvous()
    counts = {}
    pairs = []
    for is_send, tag in posts:
        side = "send" if is_send else "recv"
        index = counts[side, tag] = counts.get((side, tag), 0) + 1
        item = (side, tag, index)
        partner = (meet.send if is_send else meet.recv)((0, 1, tag), item)
        if partner is not None:
            pairs.append((item, partner))
    for (side, tag, index), (other, other_tag, other_index) in pairs:
        assert side != other and tag == other_tag and index == other_index
    waiting = list(meet.waiting())
    assert len(pairs) * 2 + len(waiting) == len(posts)
