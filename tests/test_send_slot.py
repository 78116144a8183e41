"""The shared send slot (``store.send_slot``, lua/send_slot.lua) and its outage rule
(``crawl.politeness.SendGate``), on real Redis servers, with explicit times."""

from __future__ import annotations

import logging
import math
import sys
import time
from pathlib import Path

import pytest
import redis

from frontier_rate.crawl.loop_stalls import LoopStalls
from frontier_rate.crawl.politeness import SendGate, SendHeld
from frontier_rate.store.health import clock_offset, kept_offset
from frontier_rate.store.keys import Keys
from frontier_rate.store.scripts import Scripts
from frontier_rate.store.send_slot import SENDER_SETTLE, SendSlots

sys.path.insert(0, str(Path(__file__).parent))
from redis_servers import RedisServer  # noqa: E402

HOST = "example.com"


@pytest.fixture
def slots(redis_url: str, namespace: str):
    client = redis.Redis.from_url(redis_url)
    scripts = Scripts(client)
    keys = Keys(namespace, 1)
    yield (SendSlots(scripts, keys, sender="a", settle=0.0),
           SendSlots(scripts, keys, sender="b", settle=0.0))
    client.delete(keys.send, keys.senders)
    client.close()


def test_the_longer_of_both_delays_holds_between_two_sends(slots):
    a, b = slots
    assert a.reserve(HOST, 0.05, 100.0).wait == 0.0  # a robots.txt fetch: no Crawl-delay known
    # a process that knows the host's Crawl-delay of 1 s waits 1 s after it, not 0.05 s
    assert b.reserve(HOST, 1.0, 100.01).wait == pytest.approx(0.99)
    # and the robots.txt fetch of a process that does not know it waits 1 s after that send
    assert a.reserve(HOST, 0.05, 101.01).wait == pytest.approx(0.99)
    assert b.reserve("other.org", 1.0, 101.01).wait == 0.0  # hosts are apart


def test_a_late_send_moves_the_next_one(slots):
    a, b = slots
    assert a.reserve(HOST, 1.0, 100.0).wait == 0.0
    a.late(HOST, 1.0, 100.4)  # it left 0.4 s late
    assert b.reserve(HOST, 1.0, 100.5).wait == pytest.approx(0.9)
    a.late(HOST, 1.0, 100.2)  # an earlier stamp never shortens the gap
    assert a.reserve(HOST, 1.0, 101.0).wait == pytest.approx(1.4)


def test_a_late_send_takes_the_next_slot_once_another_was_reserved_after_its_own(slots):
    a, b = slots
    assert a.reserve(HOST, 1.0, 100.0).wait == 0.0
    assert b.reserve(HOST, 1.0, 100.1).wait == pytest.approx(0.9)  # b's slot: 101.0
    # a leaves 0.3 s late: sent now it would come 0.7 s before b's; it takes the one after
    assert a.late(HOST, 1.0, 100.3, reserved=100.0).wait == pytest.approx(1.7)
    # nobody reserved after the missed slot: it leaves now, and the next send counts from it
    assert b.late(HOST, 1.0, 102.5, reserved=102.0).wait == 0.0
    assert a.reserve(HOST, 1.0, 102.6).wait == pytest.approx(0.9)


def test_reservations_count_the_processes_seen_recently(slots):
    a, b = slots
    first = a.reserve(HOST, 1.0, 100.0)
    assert (first.senders, first.place) == (1, 0)
    second = b.reserve(HOST, 1.0, 100.0)
    assert (second.senders, second.place) == (2, 1)
    assert a.reserve(HOST, 1.0, 130.0).senders == 2
    alone = a.reserve(HOST, 1.0, 100.0 + a.window + 1)  # b not seen within the window
    assert (alone.senders, alone.place) == (1, 0)


def test_a_process_counts_in_the_turns_once_it_has_settled(redis_url, namespace):
    """A new process is not counted, and has no place, until it has been taking slots for
    ``settle`` seconds; places follow the order the processes joined, so one that settles
    later never moves the others' places."""
    client = redis.Redis.from_url(redis_url)
    keys = Keys(namespace, 1)
    z, a = (SendSlots(Scripts(client), keys, sender=name, settle=10.0) for name in "za")
    try:
        first = z.reserve(HOST, 1.0, 100.0)
        assert (first.senders, first.place) == (1, -1)  # alone and new: no turn of its own
        assert z.reserve(HOST, 1.0, 110.0).place == 0  # settled
        assert a.reserve(HOST, 1.0, 111.0).place == -1  # joined at 111: new
        assert (z.reserve(HOST, 1.0, 112.0).senders, z.reserve(HOST, 1.0, 112.0).place) \
            == (1, 0)  # z does not count the new one yet
        later = a.reserve(HOST, 1.0, 121.5)
        assert (later.senders, later.place) == (2, 1)  # after z, though "a" < "z"
        assert z.reserve(HOST, 1.0, 122.0).place == 0
    finally:
        client.delete(keys.send, keys.senders)
        client.close()


def test_slots_are_loaded_again_after_redis_lost_its_scripts(slots, redis_url):
    a, _ = slots
    client = redis.Redis.from_url(redis_url)
    client.script_flush()
    if a.scripts.library is not None:
        client.function_flush()
    client.close()
    assert a.reserve(HOST, 1.0, 100.0).wait == 0.0


def test_bad_delays_are_refused_naming_them(slots):
    a, _ = slots
    with pytest.raises(redis.ResponseError, match="delay must be a finite number"):
        a.reserve(HOST, float("nan"), 100.0)


class Process:
    """One crawler process's view: its own clock (``now``) and ``SendGate``."""

    def __init__(self, url: str, namespace: str, name: str, settle: float = 0.0) -> None:
        self.now = 0.0
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        slots = SendSlots(Scripts(client), Keys(namespace, 1), sender=name, settle=settle)
        self.gate = SendGate(slots, url, clock=lambda: self.now, wall=lambda: self.now)
        self.sent: list[float] = []
        self.widen = 0.0
        """Seconds of this process's loop stalls added to its gaps (``LoopStalls``)."""

    def send(self) -> None:
        """Reserve the host's next send, wait for it and send."""
        self.now = at = self.gate.reserve(HOST, 1.0, self.widen)
        self.sent.append(at)


def _both_sending(url: str, namespace: str) -> tuple[Process, Process]:
    """Processes "a" and "b", each seen sending by the other (two sends each, in turn)."""
    a, b = Process(url, namespace, "a"), Process(url, namespace, "b")
    for process in (a, b, a, b):
        process.send()
    return a, b


def test_an_outage_never_shortens_the_gap_between_processes(tmp_path, namespace):
    """Redis down: two processes that last saw each other send to one host in turns.

    Before issue 63 each paced the host alone through a Redis restart: one host got two
    requests 0.424 s apart under a 0.5 s delay.
    """
    with RedisServer(tmp_path / "redis") as server:
        a, b = Process(server.url, namespace, "a"), Process(server.url, namespace, "b")
        for process in (a, b, a):  # both seen sending
            process.send()
        assert (a.gate.senders, b.gate.senders) == (2, 2)
        server.kill()
        a.now = b.now = 10.0  # both want to send again while Redis is down
        for _ in range(4):
            a.send()
            b.send()
        assert a.gate.breaker.outage_since is not None
        # Redis back, emptied (a restart without persistence): it never saw the turns taken
        server.start()
        last = a.sent[-1]
        a.now = a.gate.breaker.retry_at = last + 0.5
        a.send()
        assert a.gate.breaker.outage_since is None
        assert a.sent[-1] >= last + 1.0, (last, a.sent[-1])
        b.now = b.gate.breaker.retry_at = a.sent[-1] + 0.1
        b.send()  # and the other process's next send keeps the gap after it
        assert b.sent[-1] >= a.sent[-1] + 0.99, (a.sent[-1], b.sent[-1])
    sends = sorted(a.sent[-5:-1] + b.sent[-5:-1])
    gaps = [later - earlier for earlier, later in zip(sends, sends[1:], strict=False)]
    assert min(gaps) >= 0.99, sends  # 1 s, less the two processes' clock offsets' error
    assert sends[-1] - sends[0] <= 8.5, sends  # and no slower than one send per delay


def test_the_send_slots_are_asked_again_every_second_during_an_outage(tmp_path, namespace):
    """Redis down for a while, then back: the process takes shared slots again within a
    second (``SEND_RETRY_MAX``), not after the client's backoff (1, 2, 4, 8 ... s), during
    which it sent in its own turns while the others, back on Redis, never saw its sends."""
    with RedisServer(tmp_path / "redis") as server:
        a = Process(server.url, namespace, "a")
        a.send()
        server.kill()
        a.now = 10.0
        while a.gate.breaker.failures < 3:  # sends in its own turns, one a second, Redis down
            a.send()  # the client's backoff after a third failed attempt: 8 s
        assert a.gate.breaker.outage_since is not None and len(a.sent) < 30
        server.start()
        a.now += 1.0
        a.send()
        a.now += 1.0
        a.send()
        assert a.gate.breaker.outage_since is None


@pytest.fixture
def one_clock(monkeypatch):
    """Every process's clock offset to Redis's fixed, as if measured exactly: the clocks of
    these processes jump by seconds while Redis's moves on by milliseconds, so an offset
    measured again after an outage would shift them apart."""
    from frontier_rate.crawl import politeness

    monkeypatch.setattr(politeness, "clock_offset", lambda client, wall: (1e9, 0.0))


def _gaps(*processes: Process) -> list[float]:
    sends = sorted(at for process in processes for at in process.sent)
    return [later - earlier for earlier, later in zip(sends, sends[1:], strict=False)]


def test_a_process_that_found_redis_unreachable_at_open_holds_its_sends_a_while(tmp_path,
                                                                                namespace,
                                                                                one_clock):
    """A crawl opened while Redis was unreachable (``OpenWait``): Redis answers it while
    another process, its breaker still backing off (a Cluster failover answers for the other
    primaries' slots), sends in its outage turns, which Redis never sees. Without the hold
    the new process took the slot after the last one Redis recorded: the soak's quick
    Cluster form, 0.041 s after the other's turn under 0.3 s."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        a.gate.outage_seen(redis.ConnectionError("a primary is down"))
        a.gate.breaker.retry_at = math.inf  # its backoff: it does not ask Redis yet
        a.now = b.now = b.sent[-1]
        a.send()  # a turn Redis never sees
        c = Process(server.url, namespace, "c")
        c.now = failed_at = a.sent[-1] - 0.5
        c.gate.hold_after_outage(failed_at)
        held = 0
        while True:
            try:
                c.send()
                break
            except SendHeld:
                held += 1
                c.now += 1.0  # asked again every SEND_RETRY_MAX
                if c.now >= failed_at + 2.0:  # meanwhile a asks again and is back
                    a.gate.breaker.retry_at = 0.0
                    a.now = max(a.now, c.now)
                    a.send()
    assert min(_gaps(a, b, c)) >= 0.99, (a.sent, b.sent, c.sent)
    assert held >= SENDER_SETTLE - 1
    assert c.sent[-1] >= failed_at + SENDER_SETTLE


def test_the_turns_of_an_outage_come_after_the_slots_taken_before_it(tmp_path, namespace, one_clock):
    """Slots taken in Redis before an outage are still to come when it starts: each process
    holds at most one ahead, so the first turn comes ``senders`` delays after the outage was
    found. Before, a process whose place came first took a turn at the slot another process
    had taken just before Redis went (the soak: 0.23 s under 0.5 s)."""
    with RedisServer(tmp_path / "redis") as server:
        a, b, c = (Process(server.url, namespace, name) for name in "abc")
        for process in (a, b, c):  # all three seen sending
            process.send()
        for process in (c, b, a):  # slots at 10, 11 and 12, taken at 10 in this order
            process.now = 10.0
            process.send()
        assert (a.gate.senders, a.gate.place, c.gate.place) == (3, 0, 2)
        assert [p.sent[-1] - c.sent[-1] for p in (b, a)] == pytest.approx([1.0, 2.0], abs=0.01)
        server.kill()
        for process in (c, b, a):  # each wants to send again once its slot is past
            process.send()
        assert c.gate.breaker.outage_since is not None
    assert min(_gaps(a, b, c)[-5:]) >= 0.99, sorted(a.sent + b.sent + c.sent)


def test_after_an_outage_a_process_back_first_keeps_to_its_turns(tmp_path, namespace, one_clock):
    """Redis back: a process that takes shared slots again keeps to its own turns for a
    while, since another may still send in its turns, which Redis never saw. Before, it took
    the slot after its own last send, the one the other process had for its turn."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        server.kill()
        a.now = b.now = 10.0
        for _ in range(2):
            a.send()
            b.send()  # b's last turn is after a's last
        assert b.sent[-1] > a.sent[-1]
        server.start()  # emptied: Redis knows none of the turns
        a.gate.breaker.retry_at = a.now
        a.send()
        assert a.gate.breaker.outage_since is None
        b.now = b.gate.breaker.retry_at = b.sent[-1]
        b.send()  # back too: after a's slot
    assert min(_gaps(a, b)[-5:]) >= 0.99, (a.sent, b.sent)


def test_a_slot_moved_to_a_turn_is_recorded_before_another_process_reserves(tmp_path, namespace,
                                                                           one_clock):
    """Back from an outage, a process keeps to its turns: its slot is moved to its next own
    window. Before, Redis recorded the slot it gave and the move was stamped in a second
    call: a process reserving in between counted from the slot not sent at (the cluster
    soak, after an 8 s CLIENT PAUSE: 0.17 s under 0.3 s). Now the move is made in the
    reservation itself."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        assert (a.gate.senders, a.gate.place, b.gate.place) == (2, 0, 1)
        server.kill()
        a.now = 10.0
        a.send()  # a finds Redis gone and sends in its turns; b sends nothing meanwhile
        assert a.gate.breaker.outage_since is not None
        server.start()  # emptied: Redis knows none of a's turns
        a.now = a.gate.breaker.retry_at = a.sent[-1] + 0.5
        reserve = a.gate.slots.reserve

        def b_reserves_meanwhile(*args, **kwargs):
            taken = reserve(*args, **kwargs)
            b.now = a.now + 0.01  # b, which never saw the outage, reserves right after a
            b.send()
            return taken

        a.gate.slots.reserve = b_reserves_meanwhile
        a.send()
        assert a.gate.breaker.outage_since is None
    assert abs(b.sent[-1] - a.sent[-1]) >= 0.99, (a.sent, b.sent)


def test_the_turn_redis_gives_is_the_one_the_gate_computes(slots):
    """lua/send_slot.lua's "turn" mode against ``SendGate._turn`` (independent code): the
    start of the caller's first window of one delay at or after the free time."""
    a, _ = slots
    gate = SendGate(a, None, clock=lambda: 0.0, wall=lambda: 0.0)
    for count, place, delay, now, earliest in [(2, 0, 1.0, 100.3, 101.0), (3, 2, 0.5, 200.1, 0.0),
                                               (4, 1, 0.3, 1.8e9 + 0.77, 1.8e9 + 0.9),
                                               (1, 0, 1.0, 300.0, 300.4)]:
        host = f"h{count}{place}.example"
        gate.senders, gate.place = count, place
        wait = a.reserve(host, delay, now, earliest=earliest, turn=(count, place)).wait
        assert now + wait == pytest.approx(gate._turn(max(now, earliest), delay), abs=1e-5)
    with pytest.raises(redis.ResponseError, match="place"):
        a.reserve("bad.example", 1.0, 100.0, turn=(2, 2))


def test_a_late_send_whose_record_took_long_is_recorded_again(tmp_path, namespace, one_clock):
    """A late send's record carries the time read before the call: when Redis answered it
    seconds later (a ``CLIENT PAUSE``) the request leaves then, so the record is made again.
    Before, the next process reserved against the old record and sent with it (the soak:
    0.066 s under 0.5 s)."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = Process(server.url, namespace, "a"), Process(server.url, namespace, "b")
        a.send()
        a.now = 1.0
        slot = a.gate.reserve(HOST, 1.0)
        record, calls = a.gate.slots.late, []

        def paused(*args, **kwargs):
            if not calls:
                a.now += 2.0  # the first record is answered 2 s after it was asked
            calls.append(a.now)
            return record(*args, **kwargs)

        a.gate.slots.late = paused
        a.now = slot + 0.2  # the request missed its slot
        assert a.gate.retake(HOST, 1.0, slot) is None  # it leaves now (after the call)
        a.sent.append(a.now)
        assert len(calls) == 2
        b.now = a.now
        b.send()
    assert b.sent[-1] - a.sent[-1] >= 0.99, (a.sent, b.sent)


def test_a_process_new_to_the_frontier_holds_its_sends_through_an_outage(tmp_path, namespace,
                                                                         one_clock):
    """A process that joined just before an outage has no turn yet: the others have not all
    seen it, so it holds its sends until Redis answers (``SendHeld``), and one that saw it
    join does not count it either. Before, it counted one process more than some of the
    others, and its turns met theirs (the soak: 0.30 s under 0.5 s)."""
    with RedisServer(tmp_path / "redis") as server:
        a, b, c = (Process(server.url, namespace, name, settle=10.0) for name in "abc")
        for process in (a, b, c):
            process.send()  # joined at 0
        for process in (a, b, c):
            process.now = 20.0
            process.send()  # settled: slots at 20, 21 and 22
        d = Process(server.url, namespace, "d", settle=10.0)
        d.now = 22.0
        d.send()  # joins with the slot at 23
        b.now = 23.5
        b.send()  # the slot at 24, taken after d joined
        assert (b.gate.senders, b.gate.place, d.gate.place) == (3, 1, -1)
        server.kill()
        a.now = c.now = 23.5
        for _ in range(2):
            for process in (a, b, c):
                process.send()
            with pytest.raises(SendHeld):
                d.gate.reserve(HOST, 1.0)
        assert d.gate.breaker.outage_since is not None
    sends = sorted(at for process in (a, b, c, d) for at in process.sent if at >= 20.0)
    assert min(later - earlier for earlier, later in zip(sends, sends[1:], strict=False)) \
        >= 0.99, sends


def test_a_process_whose_first_reservation_fails_holds_its_sends(tmp_path, namespace,
                                                                 one_clock):
    """A crawler whose open Redis answered and whose first send slot it does not (a Cluster
    failover of the primary holding the slots) has no turn among the others: it holds its
    sends through the outage, and ``SENDER_SETTLE`` seconds after it found Redis gone, as
    one that found Redis unreachable at open. Before, it counted itself the only sender and
    sent at once, between the turns of the processes already crawling."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        c = Process(server.url, namespace, "c")
        server.kill()
        failed_at = c.now = b.sent[-1] + 0.3
        held = 0
        while not c.sent:
            assert held < 30, "never sent"
            for process in (a, b):  # the others go on, in turns, then on Redis again
                if process.now < c.now:
                    process.gate.breaker.retry_at = min(process.gate.breaker.retry_at, c.now)
                    process.send()
            if c.now >= failed_at + 3.0 and server.proc.poll() is not None:
                server.start()  # emptied: the turns taken meanwhile are not in it
            try:
                c.send()
            except SendHeld:
                held += 1
                c.now += 1.0  # asked again every SEND_RETRY_MAX
        for process in (a, b, c):
            process.send()
    assert min(_gaps(a, b, c)) >= 0.99, (a.sent, b.sent, c.sent)
    assert held >= SENDER_SETTLE - 1
    assert c.sent[0] >= failed_at + SENDER_SETTLE
    assert a.gate.breaker.outage_since is None and c.gate.breaker.outage_since is None


def test_the_stall_allowance_is_the_longest_stall_within_the_window():
    """``LoopStalls`` (a sliding-window maximum) against the maximum of every stall recorded
    within the window, over a random sequence (fixed seed), and its cap."""
    import random

    rng = random.Random(63)
    stalls, seen, now = LoopStalls(window=5.0, cap=0.8), [], 0.0
    for _ in range(2000):
        now += rng.expovariate(4.0)
        if rng.random() < 0.7:
            lag = rng.choice([rng.uniform(0, 0.05), rng.uniform(0, 1.2)])
            stalls.record(lag, now)
            seen.append((now, lag))
        expected = max((lag for at, lag in seen if at >= now - 5.0), default=0.0)
        assert stalls.allowance(now) == pytest.approx(min(0.8, expected))


def test_a_process_whose_loop_stalls_keeps_the_next_send_further_away(slots, redis_url):
    """A request leaves some loop iterations after its slot; a callback that holds the loop
    meanwhile sends it late, and the next process, sending at its own slot, came closer
    than the delay (the short soak: 0.23 s under 0.3 s while a spider's manifest callback
    yielded 180 requests). The stalling process's recent stalls widen the gap recorded with
    its slot, so the next send of any process waits for them too."""
    a, b = slots
    clock = [100.0]
    gate = SendGate(a, redis_url, clock=lambda: clock[0], wall=lambda: clock[0])
    gate.synced, gate.offset = True, 0.0
    assert gate.reserve(HOST, 1.0, widen=0.3) == pytest.approx(100.0)
    taken = b.reserve(HOST, 1.0, 100.01)
    assert taken.wait == pytest.approx(1.29)  # 1.3 after a's slot
    assert taken.prior_gap == pytest.approx(1.3)  # b learns how wide a's gap was
    # a request that left late, recorded as sent then: the widened gap counts from it
    other = "late.example"
    assert gate.reserve(other, 1.0) == pytest.approx(100.0)
    clock[0] = 100.5
    assert gate.retake(other, 1.0, 100.0, widen=0.3) is None  # nobody reserved after it
    assert b.reserve(other, 1.0, 100.6).wait == pytest.approx(1.2)


def test_the_turns_after_an_outage_are_not_widened(tmp_path, namespace, one_clock):
    """Back from an outage, a process keeps to turns whose windows line up with those of a
    process still in the outage (its own turns, which Redis never sees) only on the delay
    itself: widened by the first one's loop stalls, its windows moved onto the other's.
    The widening is left out of the turns."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        assert (a.gate.place, b.gate.place) == (0, 1)
        server.kill()
        a.now = b.now = 10.0
        for _ in range(2):
            a.send()
            b.send()
        server.start()
        a.widen = 0.45  # a is back (its loop stalls); b still finds Redis gone until later
        a.gate.breaker.retry_at = a.now
        b.gate.breaker.retry_at = b.now + 1.0  # SEND_RETRY_MAX: asked again within 1 s
        a.send()
        b.send()
        assert a.gate.breaker.outage_since is None and b.gate.breaker.outage_since is not None
        for _ in range(8):
            a.send()
            b.send()
    sends = sorted([(t, "a") for t in a.sent] + [(t, "b") for t in b.sent])
    assert min(_gaps(a, b)) >= 0.99, " ".join(f"{name}{t:.2f}" for t, name in sends)


def test_the_stall_watch_records_how_late_its_timer_fired():
    """``StallWatch`` on a scheduler it does not own (Twisted's ``task.Clock``) and a clock the
    test moves: a timer on time records nothing; one held 0.5 s by a blocked loop records
    the stall; stopped, it schedules nothing more."""
    from twisted.internet import task

    from frontier_rate.crawl.scrapy_politeness import StallWatch

    scheduler, now = task.Clock(), [0.0]
    stalls = LoopStalls()
    watch = StallWatch(stalls, tick=0.02, scheduler=scheduler, clock=lambda: now[0])
    watch.start()
    now[0] = 0.02
    scheduler.advance(0.02)
    assert stalls.allowance(now[0]) == 0.0
    now[0] = 0.54  # the loop was blocked: the timer due at 0.04 fires at 0.54
    scheduler.advance(0.02)
    assert stalls.allowance(now[0]) == pytest.approx(0.5)
    watch.stop()
    assert scheduler.getDelayedCalls() == []
    watch.start()  # stopped for good: the crawl has ended
    assert scheduler.getDelayedCalls() == []


def test_the_stalls_expected_at_a_crawlers_start_widen_its_slots_for_the_span_only():
    """``StartStalls``: nothing before the spider opens; in the first ``START_SPAN`` seconds
    ``START_STALL``, at most ``START_SHARE`` of the host's delay; nothing afterwards; a second
    opening does not move the span."""
    from frontier_rate.crawl.loop_stalls import (
        START_SHARE,
        START_SPAN,
        START_STALL,
        StartStalls,
    )

    assert START_SHARE * 1.0 > START_STALL > START_SHARE * 0.05  # both bounds are met below
    start = StartStalls()
    assert start.expected(1.0, 100.0) == 0.0
    start.start(100.0)
    start.answered(100.0)  # a page answered at once: the span is the opening's alone
    assert start.expected(1.0, 100.0) == START_STALL
    assert start.expected(0.05, 101.0) == pytest.approx(START_SHARE * 0.05)
    start.start(102.0)
    assert start.expected(1.0, 100.0 + START_SPAN - 0.01) == START_STALL
    assert start.expected(1.0, 100.0 + START_SPAN) == 0.0


def test_the_stalls_expected_at_a_crawlers_start_last_from_its_first_page_answer_too():
    """``StartStalls.answered``: the first page answer after the spider opened makes the span
    end ``START_SPAN`` after it (the first answers' callbacks stall the loop longest, seconds
    after the opening where robots.txt came first); later answers, and an answer before the
    spider opened, move nothing; an answer within the span never shortens it."""
    from frontier_rate.crawl.loop_stalls import START_SPAN, START_STALL, StartStalls

    start = StartStalls()
    start.answered(50.0)  # before the opening: nothing
    assert start.expected(1.0, 50.0) == 0.0
    start.start(100.0)
    start.answered(107.0)
    assert start.expected(1.0, 100.0 + START_SPAN + 1.0) == START_STALL  # between: still on
    assert start.expected(1.0, 107.0 + START_SPAN - 0.01) == START_STALL
    assert start.expected(1.0, 107.0 + START_SPAN) == 0.0
    start.answered(120.0)  # only the first answer counts
    assert start.expected(1.0, 121.0) == 0.0
    early = StartStalls()
    early.start(100.0)
    early.answered(100.5)
    assert early.expected(1.0, 100.0 + START_SPAN + 0.4) == START_STALL
    assert early.expected(1.0, 100.5 + START_SPAN) == 0.0


def test_the_stalls_expected_at_a_crawlers_start_hold_until_its_first_page_answer():
    """Between the opening's span and the first page answer the slots stay widened: the
    first requests of a host (its manifest, after robots.txt) take their slots then (the
    Cluster hour of 2026-12-07: 0.2067 s under 0.5 s, unwidened). A crawl whose pages never
    answer is widened for ``START_LIMIT`` seconds after its opening, no longer."""
    from frontier_rate.crawl.loop_stalls import START_LIMIT, START_SPAN, START_STALL, StartStalls

    assert START_LIMIT > START_SPAN + 10.0
    start = StartStalls()
    start.start(100.0)
    assert start.expected(1.0, 100.0 + START_SPAN + 5.0) == START_STALL  # no answer yet
    start.answered(100.0 + START_SPAN + 6.0)
    assert start.expected(1.0, 100.0 + 2 * START_SPAN + 6.0 - 0.01) == START_STALL
    assert start.expected(1.0, 100.0 + 2 * START_SPAN + 6.0) == 0.0
    silent = StartStalls()
    silent.start(100.0)
    assert silent.expected(1.0, 100.0 + START_LIMIT - 0.01) == START_STALL
    assert silent.expected(1.0, 100.0 + START_LIMIT) == 0.0


def test_a_process_whose_frontier_saw_the_outage_keeps_to_the_turns(tmp_path, namespace,
                                                                     one_clock):
    """A process whose send gate made no call while Redis was down, but whose frontier
    client found it gone (``SendGate.outage_seen``, the client breaker's listener), keeps to
    its turns once Redis is back. Before, it took the slot after the last one Redis stored,
    just after another process's outage turn that Redis never saw (the short soak: 0.19 s
    under 0.5 s after a Redis restart)."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        server.kill()
        b.gate.outage_seen(ConnectionError("Connection refused"))  # b sends nothing meanwhile
        a.now = b.now = 10.0
        for _ in range(2):
            a.send()  # a's turns: Redis never sees them
        assert a.gate.breaker.outage_since is not None
        server.start()  # emptied: Redis knows none of a's turns
        b.now = b.gate.breaker.retry_at = a.sent[-1] + 0.2
        b.send()
        assert b.gate.breaker.outage_since is None  # back, through Redis
    assert min(_gaps(a, b)) >= 0.99, (a.sent, b.sent)


def test_the_frontier_client_breaker_tells_its_listeners_of_each_outage_once():
    """The link ``SendGate.outage_seen`` hangs on: the first failure of an outage is told,
    the next ones of the same outage are not; after a reset the next outage is told again;
    a listener that raises does not stop the breaker."""
    from frontier_rate.client.outage import Breaker

    told: list[str] = []
    breaker = Breaker("redis://127.0.0.1:1/0")
    breaker.listeners += [lambda exc: 1 / 0, lambda exc: told.append(str(exc))]
    breaker.trip(ConnectionError("first"), 0.0)
    breaker.trip(ConnectionError("again"), 1.0)
    assert told == ["first"] and breaker.outage_since == 0.0
    breaker.reset(2.0)
    breaker.trip(ConnectionError("second"), 3.0)
    assert told == ["first", "second"]


def test_an_outage_soon_after_the_last_one_ended_is_said_at_info(caplog):
    """A Cluster failover's flaps (the lost primary's slots fail, the others answer): an
    outage beginning within ``FLAP_WINDOW`` of the last one's end, and its end, are INFO
    lines, its listeners still told; one beginning later is a WARNING again."""
    from frontier_rate.client.outage import FLAP_WINDOW, Breaker

    told: list[str] = []
    breaker = Breaker("redis://:s3cret-pw@127.0.0.1:1/0")
    breaker.listeners.append(lambda exc: told.append(str(exc)))
    caplog.set_level(logging.INFO, logger="frontier_rate")

    def said(start: float, end: float, name: str) -> list[int]:
        caplog.clear()
        breaker.trip(ConnectionError(name), start)
        breaker.reset(end)
        return [r.levelno for r in caplog.records]

    assert said(0.0, 2.0, "first") == [logging.WARNING, logging.WARNING]
    assert said(3.0, 4.0, "flap") == [logging.INFO, logging.INFO]
    assert "again, 1.0 s after it came back" in caplog.records[0].getMessage()
    assert said(4.0 + FLAP_WINDOW + 1.0, 40.0 + FLAP_WINDOW,
                "later") == [logging.WARNING, logging.WARNING]
    assert told == ["first", "flap", "later"]
    assert "s3cret-pw" not in caplog.text


def test_the_turns_of_an_outage_come_after_slots_widened_by_loop_stalls(tmp_path, namespace,
                                                                       one_clock):
    """A slot taken before an outage may be followed by a gap widened by its process's loop
    stalls (``LoopStalls``, at most ``STALL_CAP``): the slots still to come when Redis goes
    reach that much further, and the first turn of an outage comes after them. Before, it
    came ``senders`` plain delays after the outage was found (the short soak: 0.065 s under
    0.5 s, another crawler's slot taken before a Redis restart)."""
    with RedisServer(tmp_path / "redis") as server:
        a, b, c = (Process(server.url, namespace, name) for name in "abc")
        for process in (a, b, c):
            process.send()
        for process in (c, b, a):
            process.widen = 0.9  # each one's loop stalled: each slot 1.9 s after the one before
            process.now = 10.0
            process.send()
        assert [p.sent[-1] - c.sent[-1] for p in (b, a)] == pytest.approx([1.9, 3.8], abs=0.01)
        server.kill()
        for process in (c, b, a):
            process.widen = 0.0
            process.now = 10.0  # each finds Redis gone at once
            process.send()
        assert c.gate.breaker.outage_since is not None
    pre = sorted(p.sent[-2] for p in (a, b, c))
    turns = sorted(p.sent[-1] for p in (a, b, c))
    assert min(turns) >= pre[-1] + 1.9 - 0.01, (pre, turns)
    assert min(_gaps(a, b, c)[-3:]) >= 0.99, sorted(a.sent + b.sent + c.sent)


def test_a_request_retakes_its_slot_when_the_loop_stalled_longer_since_it_was_taken():
    """A slot taken seconds ahead (a crawler's start: robots.txt and manifests queued) was
    recorded with the gap widened by the stalls known then; when the loop has stalled
    longer since, the request does not simply leave at its slot (it goes through the late
    path: the next free slot, with the gap widened by the stalls seen now)."""
    import time
    from types import SimpleNamespace

    from frontier_rate.crawl.scrapy_politeness import SEND_MARGIN, ScrapyPoliteness

    politeness = ScrapyPoliteness(SimpleNamespace(engine=None, stats=None), None,
                                  time.monotonic, lambda host, delay: None)
    now = time.monotonic()
    assert not politeness._late(now, 0.0)  # on time, no stall
    assert politeness._late(now - SEND_MARGIN - 0.05, 0.0)  # missed its slot
    politeness.stalls.record(0.4, now)
    assert politeness._late(now, 0.0)  # the loop stalled 0.4 s since the slot was taken
    assert not politeness._late(now, 0.4)  # the gap recorded with the slot allowed for it


def test_a_request_woken_late_in_a_new_stall_retakes_its_slot():
    """A request that wakes within ``SEND_MARGIN`` of its slot, but late in a stall longer
    than its gap allowed for, is written later still (the loop turns again before the
    write): its lateness and that stall together must fit in the gap's margin and widening,
    else it goes through the late path. Before, anything within ``SEND_MARGIN`` left (the
    Cluster hours: 0.286 s under 0.3 s)."""
    import time
    from types import SimpleNamespace

    from frontier_rate.crawl.scrapy_politeness import SEND_MARGIN, ScrapyPoliteness

    politeness = ScrapyPoliteness(SimpleNamespace(engine=None, stats=None), None,
                                  time.monotonic, lambda host, delay: None)
    now = time.monotonic()
    late = 0.6 * SEND_MARGIN  # within the margin: it left at once before
    assert politeness._late(now - late, 0.0)  # a stall the gap did not allow for
    assert not politeness._late(now - late, 0.4 * SEND_MARGIN)  # one it did
    assert not politeness._late(now - 0.4 * SEND_MARGIN, 0.0)  # a short one: leaves
    politeness.stalls.record(0.8 * SEND_MARGIN, now)  # a stall the loop's timer saw
    assert politeness._late(now - 0.3 * SEND_MARGIN, 0.0)
    assert not politeness._late(now - 0.3 * SEND_MARGIN, 0.8 * SEND_MARGIN)


def test_a_send_whose_delay_the_others_do_not_share_is_held_through_an_outage(tmp_path,
                                                                             namespace):
    """A restarted crawler's robots.txt fetch keeps ``ROBOTS_GAP`` (1 s) before it read the
    host's Crawl-delay, where the others pace the host at its delay (0.5 s): in an outage,
    turns on a grid of 1 s and turns on a grid of 0.5 s do not line up (the short soak:
    0.146 s under 0.5 s). Such a send is held until Redis answers again
    (``may_turn=False``); the same send in turns shows the gap the rule prevents."""
    with RedisServer(tmp_path / "redis") as server:
        a, b = _both_sending(server.url, namespace)
        server.kill()
        a.now = b.now = 10.0
        pages = []
        for _ in range(6):
            a.now = a.gate.reserve(HOST, 0.5)
            pages.append(a.now)
        with pytest.raises(SendHeld):
            b.gate.reserve(HOST, 1.0, may_turn=False)
        with pytest.raises(SendHeld):
            b.gate.retake(HOST, 1.0, b.now, may_turn=False)
        robots = b.gate.reserve(HOST, 1.0)  # what the rule holds back: a window of its own
    assert min(abs(robots - at) for at in pages) < 0.5, (robots, pages)


def _clients(observer: redis.Redis) -> int:
    """The server's client connections, less ``observer``'s own."""
    return int(observer.info("clients")["connected_clients"]) - 1


def test_the_connections_reservations_opened_while_redis_waited_are_closed_after_it(
        tmp_path, namespace):
    """Reservations run in the reactor's thread pool, so reservations waiting together on
    Redis (an 8 s CLIENT PAUSE in the soak) each open a connection, and the client's pool
    kept them all, idle, afterwards: 4-9 connections a crawler, 3-4 more after each pause
    (issue 63's soak, where Redis's memory was judged to grow). ``IDLE_DROP_AFTER`` seconds
    after the outage they are closed."""
    import threading

    from frontier_rate.crawl.politeness import IDLE_DROP_AFTER

    with RedisServer(tmp_path / "redis") as server:
        observer = server.client()
        now = [0.0]
        client = redis.Redis.from_url(server.url, socket_timeout=5, socket_connect_timeout=5)
        gate = SendGate(SendSlots(Scripts(client), Keys(namespace, 1), sender="a", settle=0.0),
                        server.url, clock=lambda: now[0], wall=lambda: now[0])
        gate.reserve(HOST, 1.0)
        assert _clients(observer) == 1
        gate.outage_seen(redis.ConnectionError("the frontier client found Redis gone"))
        now[0] = gate.breaker.retry_at = 10.0  # the gate asks Redis again: while it waits
        observer.execute_command("CLIENT", "PAUSE", 1000)
        waiting = [threading.Thread(target=gate.reserve, args=(f"host{i}.example", 1.0))
                   for i in range(6)]
        for thread in waiting:
            thread.start()
        for thread in waiting:
            thread.join(timeout=10)
        assert gate.breaker.outage_since is None  # back: Redis answered them all
        assert _clients(observer) >= 6  # one connection each, idle now
        now[0] += IDLE_DROP_AFTER - 1
        gate.reserve("early.example", 1.0)
        assert _clients(observer) >= 6  # not yet: a call may still wait on Redis
        now[0] += 1
        gate.reserve("late.example", 1.0)
        deadline = time.monotonic() + 5  # the server frees a client when it reads its close
        while _clients(observer) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _clients(observer) <= 1  # closed (the next call takes one again)
        assert gate.reserve("again.example", 1.0) >= now[0]
        assert _clients(observer) == 1
        client.close()
        observer.close()


def test_a_write_is_held_by_a_stall_that_began_right_after_its_hand_over():
    """``HeldWrites.written_by``: the end of a stall that began within ``WRITE_WITHIN`` of a
    request's hand-over and ended after it; a stall that began later (the write had gone),
    one over before the hand-over, or one shorter than ``WRITE_FLOOR`` holds nothing."""
    from frontier_rate.crawl.loop_stalls import WRITE_FLOOR, WRITE_WITHIN, HeldWrites

    writes = HeldWrites(window=30.0)
    writes.record(0.3, 99.9)  # over before the hand-over at 100
    writes.record(WRITE_FLOOR / 2, 100.01)  # too short to keep
    assert writes.written_by(100.0) is None
    writes.record(0.4, 100.0 + WRITE_WITHIN / 2 + 0.4)  # began just after the hand-over
    assert writes.written_by(100.0) == pytest.approx(100.0 + WRITE_WITHIN / 2 + 0.4)
    late = HeldWrites(window=30.0)
    late.record(0.2, 100.0 + WRITE_WITHIN + 0.01 + 0.2)  # began after the write was due
    assert late.written_by(100.0) is None
    late.record(0.5, 200.0)  # the window drops stalls older than 30 s
    assert list(late._stalls) == [(200.0, 0.5)]


def test_an_offset_is_kept_while_a_new_measurement_agrees_with_it_and_is_less_exact():
    """``health.kept_offset``: a measurement ``(offset, round trip)`` is known to within half
    its round trip; the kept one stays only while it lies within the new one's bounds and was
    measured over a shorter round trip."""
    exact = (0.100, 0.0002)
    assert kept_offset(None, exact) == exact
    assert kept_offset(exact, (0.1085, 0.030)) == exact  # 8.5 ms off, within +-15 ms
    assert kept_offset(exact, (0.1160, 0.030)) == (0.1160, 0.030)  # 16 ms: the clock moved
    assert kept_offset(exact, (0.0841, 0.030)) == (0.0841, 0.030)
    assert kept_offset(exact, (0.1000, 0.0001)) == (0.1000, 0.0001)  # the new one is exacter
    assert kept_offset(exact, (5.100, 0.030)) == (5.100, 0.030)  # a stepped clock


class SlowTime(redis.Redis):
    """A client whose TIME answer waits ``before`` seconds on its way to Redis and ``after``
    on its way back while ``slow``: a measurement taken as every client's calls come back at
    once after a ``CLIENT PAUSE`` on a loaded machine."""

    slow = False
    before, after = 0.03, 0.01

    def time(self):
        if self.slow:
            time.sleep(self.before)
        answer = super().time()
        if self.slow:
            time.sleep(self.after)
        return answer


def test_a_gate_back_from_an_outage_keeps_its_exact_offset_over_a_slow_measurement(redis_url,
                                                                                   namespace):
    """Processes space a host's requests on their offsets to Redis's clock, so an error in one
    process's offset shortens its gaps to the others' by as much (the Cluster hour of
    2026-12-07: 0.4915 s under 0.5 s, two processes, 0.8 s after a 5 s ``CLIENT PAUSE``). A
    measurement after the outage whose answer waited 30 ms going and 10 ms coming back is
    10 ms off; the gate keeps the offset it measured before. A clock that stepped is taken."""
    client = SlowTime.from_url(redis_url)
    step = 0.0

    def wall() -> float:
        return time.time() + step

    slots = SendSlots(Scripts(client), Keys(namespace, 1), sender="a", settle=0.0)
    gate = SendGate(slots, redis_url, wall=wall)
    try:
        gate.reserve(HOST, 1.0)
        exact = gate.offset
        assert exact is not None and gate.offset_trip < 0.02
        client.slow = True
        measured, trip = clock_offset(client, wall)
        assert trip >= 0.04 and abs(measured - exact) >= 0.008  # what the gate would take
        gate.outage_seen(redis.ConnectionError("a paused primary"))
        gate.breaker.retry_at = 0.0  # ask Redis again now
        gate.reserve("other.org", 1.0)
        assert gate.breaker.outage_since is None and gate.synced
        assert gate.offset == pytest.approx(exact, abs=0.002)
        step = 5.0  # this machine's clock stepped 5 s ahead: a new offset, however slow
        gate.outage_seen(redis.ConnectionError("a paused primary"))
        gate.breaker.retry_at = 0.0
        gate.reserve("third.net", 1.0)
        assert gate.offset == pytest.approx(exact - 5.0, abs=0.03)
    finally:
        keys = Keys(namespace, 1)
        client.delete(keys.send, keys.senders)
        client.close()
