"""Stable, sortable keys for view entries.

An entry keeps its key for life, so "the view as of seq N" is simply the entries alive at N
sorted by key. Appended events get a fixed-width decimal rendering of their seq, which sorts
after everything already in the view. A summary inserted in the middle of the view gets a key
strictly between its two neighbours, made unique by the seq of the condensation that inserted
it. Keys are compared as plain strings (byte order) and hold digits only.
"""

from __future__ import annotations

SEQ_WIDTH = 16
_MID = "5"


def seq_key(seq: int) -> str:
    """The key of an entry appended at ``seq`` (also of a summary placed at the very end)."""
    return f"{seq:0{SEQ_WIDTH}d}"


def key_between(lower: str, upper: str, seq: int) -> str:
    """A key ``k`` with ``lower < k < upper`` in string order, unique to ``seq``.

    ``lower`` may be ``""``. Keys live forever, so a fresh key must also differ from every key
    that was ever between the same neighbours (entries since forgotten): the midpoint alone is
    not enough, so the inserting condensation's seq is appended to it. The midpoint is never a
    prefix of ``upper``, which keeps the suffixed key below ``upper``.
    """
    return _midpoint(lower, upper) + seq_key(seq)


def _midpoint(lower: str, upper: str) -> str:
    if not lower < upper:
        raise ValueError(f"no key between {lower!r} and {upper!r}")
    common = 0
    while common < len(lower) and lower[common] == upper[common]:
        common += 1
    if common == len(lower):
        # lower is a prefix of upper: extend lower with something below upper's next digits.
        prefix = lower
        for digit in upper[common:]:
            if digit > "0":
                return prefix + chr(ord(digit) - 1) + _MID
            prefix += "0"
        raise ValueError(f"no key between {lower!r} and {upper!r}")
    low, high = lower[common], upper[common]
    if ord(high) - ord(low) > 1:
        return lower[:common] + chr((ord(low) + ord(high)) // 2)
    # Adjacent digits: anything that starts with lower and is longer sorts between the two.
    return lower + _MID


#: Above every key: keys hold digits only, and ``:`` follows ``9``.
_ABOVE_ALL = ":"


def event_keys_between(after: int, before: int) -> tuple[str, str]:
    """Keys ``(low, high)`` such that every event entry with ``after < seq < before`` has a key
    strictly between them. An event's entry keeps ``seq_key(seq)`` for life, so a range of seqs
    is a range of keys (with the summaries placed among them, which a reader tells apart);
    ``after`` may be negative and ``before`` past any seq."""
    low = seq_key(max(after, 0))
    high = seq_key(before) if before < 10**SEQ_WIDTH else _ABOVE_ALL
    return low, high
