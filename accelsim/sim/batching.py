"""Dynamic batching policies: stateless functions of the queue and the time.

A batcher holding an idle device asks `batch_to_take` how many queued requests to send now;
if the answer is 0 it sleeps until `next_wake_s` (or until something else changes). The rule
is the usual dynamic batcher (Triton's `max_queue_delay`, TF-Serving's `batch_timeout`):

- a full batch (`max_batch` requests queued) goes at once;
- otherwise the queued requests go once the oldest has waited `max_wait_s`;
- `max_wait_s = 0` sends whatever is queued as soon as a device is free.

    >>> batch_to_take(queued=3, oldest_arrival_s=1.0, now_s=1.002, max_batch=8, max_wait_s=0.002)
    3
"""

from __future__ import annotations

# NB: times within a picosecond (relative 1e-12) count as equal, so a timeout planned for a
# deadline never misses it by one float rounding step.
REL_TOLERANCE = 1e-12


def reached(now_s: float, due_s: float) -> bool:
    """True once `now_s` is at or past `due_s` (to within float rounding)."""
    return now_s >= due_s - REL_TOLERANCE * max(1.0, abs(due_s))


def batch_to_take(queued: int, oldest_arrival_s: float, now_s: float, max_batch: int,
                  max_wait_s: float) -> int:
    """How many of the `queued` requests (oldest first) to send to an idle device now."""
    if queued <= 0:
        return 0
    if queued >= max_batch:
        return max_batch
    if reached(now_s, oldest_arrival_s + max_wait_s):
        return queued
    return 0


def next_wake_s(head_arrival_s: float, fill_at_s: float, max_wait_s: float) -> float:
    """When to look again if `batch_to_take` said 0: the deadline of the oldest request not
    yet taken (`head_arrival_s`, which may still lie ahead; inf if none is known) or the
    moment the queue fills (`fill_at_s`: when the `max_batch`-th request will have arrived,
    inf if not known), whichever comes first."""
    return min(head_arrival_s + max_wait_s, fill_at_s)
