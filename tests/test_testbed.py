"""Tests of the living-web test-bed: change processes, HTTP semantics, freshness.

Servers are real ``ThreadingHTTPServer``s on 127.0.0.x; requests go through
``http.client`` (never through a proxy). A controllable clock makes the
simulated time exact where a test needs it.
"""

from __future__ import annotations

import bisect
import email.utils
import http.client
import json
import math
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import numpy as np
import pytest
from protego import Protego

from frontier_rate.testbed import (
    DAY,
    PRIVATE_PATH,
    SIM_EPOCH,
    ChangeProcess,
    Testbed,
    draw_rates,
    freshness_by_page,
    main,
    page_freshness,
    periodic_schedule,
    replay_policy,
    uniform_schedule,
    weighted_freshness,
)

pytestmark = pytest.mark.timeout(60)


class FakeClock:
    """Real seconds that move only when the test says so."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fetch(url: str, headers: dict[str, str] | None = None, method: str = "GET"):
    """(status, headers, body) of one request, without proxies or redirects."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request(method, parts.path or "/", headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


class TextOf(HTMLParser):
    """Visible text of a document: character data only (no tags, attributes, comments)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[str] = []

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)


def visible_text(body: bytes) -> str:
    parser = TextOf()
    parser.feed(body.decode())
    return " ".join(" ".join(parser.chunks).split())


def hrefs(body: bytes) -> list[str]:
    return re.findall(r'href="([^"]+)"', body.decode())


# ----- change processes and rates ------------------------------------------


def test_poisson_count_and_gaps_match_rate():
    """N(T) ~ Poisson(rate T): within 4 sd = 4 sqrt(rate T). Gap CV of Exp is 1; with
    n = 20000 gaps the sample CV has sd ~0.01, so 0.05 is 5 sd."""
    rate, horizon = 0.5, 40000.0
    times = ChangeProcess("poisson", rate, "p").times_until(horizon)
    expected = rate * horizon
    assert abs(len(times) - expected) < 4 * math.sqrt(expected)
    gaps = np.diff(times)
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05


def test_bursty_keeps_long_run_mean_and_is_bursty():
    """Bursts are geometric with mean m = 4 edits, so the count is close to compound
    Poisson with variance (bursts) * E[M^2] = (rate T / m)(2 m^2 - m); 5 sd is allowed.
    Most gaps are intra-burst (mean 0.02 / rate), so the gap CV is far above Poisson's 1
    (about 2.6 in theory)."""
    rate, horizon, m = 1.0, 40000.0, 4.0
    times = ChangeProcess("bursty", rate, "b").times_until(horizon)
    expected = rate * horizon
    sd = math.sqrt(expected / m * (2 * m * m - m))
    assert abs(len(times) - expected) < 5 * sd
    gaps = np.diff(times)
    assert gaps.std() / gaps.mean() > 2.0
    assert np.median(gaps) < 0.1 / rate


def test_periodic_has_low_gap_variance():
    """Gaps are (1 + 0.1 U(-1, 1)) / rate: within 10% of the period, CV = 0.1 / sqrt(3).
    The count drifts like a random walk of step sd 0.0577 / rate: 4 sd of it, plus 2."""
    rate, horizon = 2.0, 5000.0
    times = ChangeProcess("periodic", rate, "q").times_until(horizon)
    gaps = np.diff(times) * rate
    assert gaps.min() >= 0.9 - 1e-12 and gaps.max() <= 1.1 + 1e-12
    assert abs(gaps.std() - 0.1 / math.sqrt(3)) < 0.005
    n = rate * horizon
    assert abs(len(times) - n) < 4 * 0.1 / math.sqrt(3) * math.sqrt(n) + 2


def test_drifting_keeps_mean_and_follows_its_intensity():
    """Over whole drift periods the count is Poisson with mean rate T (4 sd). The intensity
    rate exp(A sin) / I0(A) is above its mean where sin > ln(I0(A)) / A; the share of
    changes there is checked against a numerical integral of exp(A sin) with numpy's own
    I0 (binomial, 4 sd)."""
    rate, period = 1.0, 1000.0
    process = ChangeProcess("drifting", rate, "d", drift_period=period, drift_amplitude=1.0)
    horizon = 20 * period
    times = process.times_until(horizon)
    expected = rate * horizon
    assert abs(len(times) - expected) < 4 * math.sqrt(expected)
    grid = np.linspace(0.0, horizon, 20_001)
    intensity = np.array([process.intensity(t) for t in grid])
    assert abs(np.trapezoid(intensity, grid) - expected) < 1e-3 * expected
    sine = np.sin(np.linspace(0, 2 * np.pi, 100_001))
    weight = np.exp(sine)
    share_high = weight[sine > math.log(np.i0(1.0))].sum() / weight.sum()
    high = sum(process.intensity(t) > rate for t in times) / len(times)
    assert abs(high - share_high) < 4 * math.sqrt(share_high * (1 - share_high) / len(times))
    assert share_high > 0.7


def test_change_times_are_reproducible_and_order_independent():
    a = ChangeProcess("bursty", 0.3, "same")
    early = a.times_until(100.0)
    late = a.times_until(1000.0)
    b = ChangeProcess("bursty", 0.3, "same")
    assert b.times_until(1000.0) == late
    assert late[: len(early)] == early
    assert ChangeProcess("bursty", 0.3, "other").times_until(1000.0) != late
    assert b.version_at(1000.0) == len(late)
    assert b.last_change_before(1000.0) == late[-1]


def test_rate_distributions():
    """loguniform: log-rate mean within 4 sd of the midpoint (sd = width / sqrt(12 n)).
    pareto: the fraction below the law's median is 1/2 within 4 sd of a binomial."""
    lo, hi, n = 0.5 / DAY, 50 / DAY, 20000
    rates = draw_rates(n, "loguniform", lo, hi, random.Random(1))
    assert min(rates) >= lo and max(rates) <= hi
    logs = np.log(rates)
    width = math.log(hi) - math.log(lo)
    assert abs(logs.mean() - (math.log(lo) + math.log(hi)) / 2) < 4 * width / math.sqrt(12 * n)
    alpha = 1.2
    rates = draw_rates(n, "pareto", lo, hi, random.Random(2), pareto_shape=alpha)
    assert min(rates) >= lo and max(rates) <= hi
    median = lo * (1 - 0.5 * (1 - (lo / hi) ** alpha)) ** (-1 / alpha)
    below = sum(r < median for r in rates) / n
    assert abs(below - 0.5) < 4 * 0.5 / math.sqrt(n)


@pytest.mark.parametrize("kwargs, field", [
    ({"rate_distribution": "zipf"}, "rate_distribution"),
    ({"change_model": "random"}, "change_model"),
    ({"rate_min": 0.0}, "rate_min"),
    ({"rate_min": 2.0, "rate_max": 1.0}, "rate_max"),
    ({"n_pages": 0}, "n_pages"),
    ({"n_hosts": 0}, "n_hosts"),
    ({"acceleration": -1.0}, "acceleration"),
    ({"churn_fraction": 1.5}, "churn_fraction"),
    ({"churn_fraction": 0.6, "volatile_fraction": 0.6}, "volatile_fraction"),
    ({"crawl_delays": [1.0]}, "crawl_delays"),
    ({"crawl_delays": [None, -2.0, None, None]}, "crawl_delays"),
    ({"port": 70000}, "port"),
])
def test_bad_settings_are_rejected_by_name(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Testbed(**kwargs)


@pytest.mark.parametrize("address, n_hosts", [
    ("0.0.0.0", 1), ("192.168.1.10", 2), ("10.0.0.1", 1), ("::1", 1), ("localhost", 1),
    ("127.0.0.0", 1), ("127.255.255.254", 4), ("8.8.8.8", 1),
])
def test_only_loopback_addresses_are_accepted(address, n_hosts):
    with pytest.raises(ValueError, match="base_address"):
        Testbed(n_pages=10, n_hosts=n_hosts, base_address=address)


# ----- layout, weights, truth ----------------------------------------------


def test_truth_is_reproducible_from_the_seed():
    def truth(seed):
        tb = Testbed(n_pages=30, n_hosts=3, seed=seed, port=1, change_model="mixed")
        return tb.truth(until=30 * DAY)

    a, b, c = truth(7), truth(7), truth(8)
    assert a == b
    assert a["pages"] != c["pages"]
    assert {p["model"] for p in a["pages"]} == {"poisson", "bursty", "periodic", "drifting"}
    rates = [p["rate"] for p in a["pages"]]
    assert min(rates) >= 0.5 / DAY and max(rates) <= 50 / DAY
    weights = sorted((p["weight"] for p in a["pages"]), reverse=True)
    assert weights == pytest.approx([1 / r for r in range(1, 31)], rel=1e-5)


# ----- serving --------------------------------------------------------------


def test_hosts_bind_only_requested_loopback_addresses():
    with Testbed(n_pages=12, n_hosts=3, base_address="127.0.0.5") as tb:
        port = tb.port
        assert port > 0
        expected = [("127.0.0.5", port), ("127.0.0.6", port), ("127.0.0.7", port)]
        assert [s.server_address for s in tb.servers] == expected
        assert [s.socket.getsockname() for s in tb.servers] == expected
        assert tb.seed_urls() == [f"http://{a}:{port}/" for a, _ in expected]
        for url in tb.seed_urls():
            assert fetch(url)[0] == 200
    assert tb.servers == []


_KEEP_ALIVE_CLIENT = """
import http.client, sys, time
connection = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]))
connection.request("GET", "/robots.txt"); connection.getresponse().read()
print("ready", flush=True)
send_at = float(sys.stdin.readline())
time.sleep(max(0.0, send_at - time.time()))
sent = time.time()
connection.request("GET", "/"); connection.getresponse().read()
print(sent, flush=True)
"""


def test_a_request_is_logged_when_it_reached_the_host_not_when_a_busy_server_read_it():
    """The arrival time is the kernel's receive stamp (testbed/arrival.py): a request sent
    while the test-bed's process held the GIL (a sort of ~1 s) is logged at its sending, not
    when the handler thread ran after the sort (the politeness checks measured that lag as
    shorter or longer gaps)."""
    rng = random.Random(0)
    numbers = [rng.random() for _ in range(2_000_000)]  # ~1 s to sort here
    with Testbed(n_pages=4, n_hosts=1, base_address="127.0.0.9") as tb:
        address, port = tb.servers[0].server_address
        client = subprocess.Popen([sys.executable, "-c", _KEEP_ALIVE_CLIENT, address, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert client.stdout.readline().strip() == "ready"  # its connection is open and idle
        send_at = time.time() + 0.2
        client.stdin.write(f"{send_at}\n")
        client.stdin.flush()
        time.sleep(max(0.0, send_at - 0.1 - time.time()))
        held = time.time()
        numbers.sort()  # one C call: no handler thread runs until it returns
        released = time.time()
        sent = float(client.communicate(timeout=30)[0])
        entry = next(r for r in tb.requests() if r["path"] == "/")
        arrival = tb.started_at_wall + entry["real_time"]
    assert held < sent < released - 0.2, (held, sent, released)  # sent while the GIL was held
    assert abs(arrival - sent) < 0.05, (arrival - sent, released - sent)


def test_content_changes_exactly_at_truth_change_times():
    clock = FakeClock()
    tb = Testbed(n_pages=4, n_hosts=2, acceleration=1.0, rate_min=0.02, rate_max=0.02,
                 churn_fraction=0.0, volatile_fraction=0.0, clock=clock)
    with tb:
        url = tb.page_url(0)
        changes = tb.truth(until=500.0)["pages"][0]["change_times"]
        assert len(changes) >= 3
        start = clock.t
        previous_body = None
        for c in changes[:4]:
            clock.t = start + c - 1e-3
            _, before_headers, before = fetch(url)
            clock.t = start + c + 1e-3
            _, after_headers, after = fetch(url)
            _, again_headers, again = fetch(url)
            assert before != after
            assert after == again and after_headers["ETag"] == again_headers["ETag"]
            assert before_headers["ETag"] != after_headers["ETag"]
            if previous_body is not None:
                assert before == previous_body
            previous_body = after
            assert after_headers["Last-Modified"] == email.utils.formatdate(
                math.floor(SIM_EPOCH + c), usegmt=True)
        log = [r for r in tb.requests() if r["url"] == url]
        for record in log:
            assert record["version"] == bisect.bisect_right(changes, record["sim_time"])


def test_simulated_time_runs_at_acceleration():
    clock = FakeClock()
    with Testbed(n_pages=2, n_hosts=1, acceleration=3600.0, clock=clock) as tb:
        clock.t += 2.0
        assert tb.sim_time() == pytest.approx(7200.0)
        _, headers, _ = fetch(tb.seed_urls()[0])
        assert headers["Date"] == email.utils.formatdate(SIM_EPOCH + 7200, usegmt=True)
        assert tb.requests()[-1]["sim_time"] == pytest.approx(7200.0)
        assert tb.requests()[-1]["real_time"] == pytest.approx(2.0)


def test_conditional_requests_answer_304_correctly():
    clock = FakeClock()
    tb = Testbed(n_pages=2, n_hosts=1, acceleration=1.0, rate_min=0.01, rate_max=0.01,
                 churn_fraction=0.0, volatile_fraction=0.0, clock=clock)
    with tb:
        url = tb.page_url(0)
        c1, c2 = tb.truth(until=5000.0)["pages"][0]["change_times"][:2]
        clock.t += c1 + 0.5 * (c2 - c1)
        status, headers, body = fetch(url)
        etag, last_modified = headers["ETag"], headers["Last-Modified"]
        assert status == 200 and re.fullmatch(r'"[0-9a-f]{32}"', etag)

        status, h304, body304 = fetch(url, {"If-None-Match": etag})
        assert (status, body304, h304["ETag"]) == (304, b"", etag)
        assert "Content-Length" not in h304
        assert fetch(url, {"If-None-Match": f'"nope", W/{etag}'})[0] == 304
        assert fetch(url, {"If-None-Match": "*"})[0] == 304
        assert fetch(url, {"If-None-Match": '"stale"'})[0] == 200

        assert fetch(url, {"If-Modified-Since": last_modified})[0] == 304
        earlier = email.utils.formatdate(math.floor(SIM_EPOCH + c1) - 1, usegmt=True)
        assert fetch(url, {"If-Modified-Since": earlier})[0] == 200
        assert fetch(url, {"If-Modified-Since": "not a date"})[0] == 200
        both = {"If-None-Match": '"stale"', "If-Modified-Since": last_modified}
        assert fetch(url, both)[0] == 200, "If-None-Match takes precedence"

        status, head_headers, head_body = fetch(url, method="HEAD")
        assert (status, head_body, head_headers["ETag"]) == (200, b"", etag)

        clock.t += (c2 - c1)
        assert fetch(url, {"If-None-Match": etag})[0] == 200
        assert fetch(url, {"If-Modified-Since": last_modified})[0] == 200
        codes = [r["status"] for r in tb.requests()]
        assert codes.count(304) == 4


@pytest.mark.parametrize("lie", ["now", "constant", "future", "none"])
def test_lying_hosts_send_the_last_modified_they_are_told_to(lie):
    """Half of four hosts lie; the honest ones send the last change, the Date header is
    the simulated now on both."""
    clock = FakeClock()
    tb = Testbed(n_pages=4, n_hosts=4, acceleration=1.0, rate_min=0.01, rate_max=0.01,
                 churn_fraction=0.0, volatile_fraction=0.0, clock=clock, lying_hosts=0.5, lie=lie)
    assert tb.date_modes == ["true", "true", lie, lie]
    with tb:
        clock.t += 300.0
        truth = {p["url"]: p["change_times"] for p in tb.truth()["pages"]}
        for i in range(4):
            url = tb.page_url(i)
            status, headers, _ = fetch(url)
            now = SIM_EPOCH + tb.sim_time()
            assert status == 200 and email.utils.parsedate_to_datetime(headers["Date"]).timestamp() \
                == math.floor(now)
            told = headers.get("Last-Modified")
            sent = None if told is None else email.utils.parsedate_to_datetime(told).timestamp()
            last = max([0.0, *[c for c in truth[url] if c <= tb.sim_time()]])
            expected = {"true": math.floor(SIM_EPOCH + last), "now": math.floor(now),
                        "constant": SIM_EPOCH, "future": math.floor(now + DAY), "none": None}
            assert sent == expected[tb.date_modes[i]], (i, told)
    with pytest.raises(ValueError, match="lie="):
        Testbed(n_pages=2, n_hosts=1, lie="sometimes")
    with pytest.raises(ValueError, match="lying_hosts="):
        Testbed(n_pages=2, n_hosts=1, lying_hosts=1.5)


def test_markup_churn_changes_bytes_not_visible_text():
    clock = FakeClock()
    tb = Testbed(n_pages=10, n_hosts=2, churn_fraction=1.0, volatile_fraction=0.0, clock=clock)
    with tb:
        url = tb.page_url(3)
        _, h1, b1 = fetch(url)
        _, h2, b2 = fetch(url)
        assert b1 != b2 and h1["ETag"] != h2["ETag"]
        assert visible_text(b1) == visible_text(b2)
        assert fetch(url, {"If-None-Match": h1["ETag"]})[0] == 200
        assert tb.truth()["pages"][3]["change_times"] == []


def test_volatile_token_changes_without_a_real_change():
    """Volatile pages differ on every request (so their ETag never matches), while the
    truth has no change; If-Modified-Since still sees the real last change."""
    clock = FakeClock()
    tb = Testbed(n_pages=10, n_hosts=2, churn_fraction=0.0, volatile_fraction=1.0, clock=clock)
    with tb:
        url = tb.page_url(4)
        _, h1, b1 = fetch(url)
        _, h2, b2 = fetch(url)
        token = re.compile(rb'name="csrf_token" value="([0-9a-f]+)"')
        assert token.search(b1).group(1) != token.search(b2).group(1)
        assert b"Generated at" in b1
        assert fetch(url, {"If-None-Match": h1["ETag"]})[0] == 200
        assert fetch(url, {"If-Modified-Since": h1["Last-Modified"]})[0] == 304
        assert tb.truth()["pages"][4]["change_times"] == []


def test_robots_txt_crawl_delay_and_private_page():
    with Testbed(n_pages=6, n_hosts=3, crawl_delays=[None, 2.5, 1]) as tb:
        delays = []
        for h, base in enumerate(tb.hosts):
            status, headers, body = fetch(base + "/robots.txt")
            assert status == 200 and headers["Content-Type"].startswith("text/plain")
            parser = Protego.parse(body.decode())
            assert not parser.can_fetch(base + PRIVATE_PATH, "anybot")
            assert parser.can_fetch(tb.page_url(h), "anybot")
            assert list(parser.sitemaps) == [base + "/sitemap.xml"]
            delays.append(parser.crawl_delay("anybot"))
            assert PRIVATE_PATH in hrefs(fetch(base + "/")[2])
        assert delays == [None, 2.5, 1]
        assert fetch(tb.hosts[0] + PRIVATE_PATH)[0] == 200
    default = Testbed(n_pages=4, n_hosts=4, port=1)
    assert default.crawl_delays == [None, 1.0, None, 1.0]


def test_manifest_and_sitemap_carry_the_weights():
    before = time.time()
    with Testbed(n_pages=20, n_hosts=2, acceleration=60.0) as tb:
        manifest = tb.manifest()
        assert manifest["acceleration"] == 60.0 and manifest["sim_epoch"] == SIM_EPOCH
        assert before <= manifest["started_at"] <= time.time()
        for base in tb.hosts:
            status, headers, body = fetch(base + "/manifest.json")
            assert status == 200 and json.loads(body) == manifest
        weights = {p["url"]: p["weight"] for p in manifest["pages"]}
        assert len(weights) == 20
        seen = {}
        for base in tb.hosts:
            xml = fetch(base + "/sitemap.xml")[2].decode()
            for loc, priority in re.findall(r"<loc>([^<]+)</loc><priority>([^<]+)</priority>",
                                            xml):
                assert loc.startswith(base)
                seen[loc] = float(priority)
        assert seen == weights
        assert weights == {p["url"]: p["weight"] for p in tb.truth()["pages"]}


def test_every_page_is_discoverable_from_the_home_pages():
    with Testbed(n_pages=24, n_hosts=3, links_per_page=2) as tb:
        frontier, seen = list(tb.seed_urls()), set(tb.seed_urls())
        while frontier:
            url = frontier.pop()
            if urlsplit(url).path.startswith("/private/"):
                continue
            status, _, body = fetch(url)
            assert status == 200
            for href in hrefs(body):
                target = urljoin(url, href)
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        assert {tb.page_url(i) for i in range(24)} <= seen
        cross_host = [r for r in tb.site.pages if any(
            tb.site.pages[j].host != r.host for j in r.links)]
        assert len(cross_host) == 24


def test_special_paths():
    with Testbed(n_pages=6, n_hosts=2) as tb:
        base = tb.hosts[1]
        for code in (404, 410, 503):
            assert fetch(f"{base}/status/{code}")[0] == code
        status, headers, _ = fetch(f"{base}/redirect/2")
        assert status == 301 and headers["Location"] == tb.page_url(2)
        assert fetch(f"{base}/nowhere")[0] == 404
        assert fetch(f"{base}/page/2")[0] == 404, "page 2 lives on host 0"
        assert fetch(f"{base}/status/200")[0] == 404


def test_request_log_in_memory_and_jsonl(tmp_path, capfd):
    log_path, truth_path = tmp_path / "requests.jsonl", tmp_path / "truth.json"
    tb = Testbed(n_pages=8, n_hosts=2, log_path=log_path, truth_path=truth_path)
    with tb:
        page = tb.page_url(1)
        _, headers, body = fetch(page)
        fetch(page, {"If-None-Match": '"x"'})
        fetch(tb.hosts[0] + "/robots.txt")
        fetch(tb.hosts[1] + "/status/503")
    records = tb.requests()
    assert [r["path"] for r in records] == ["/page/1", "/page/1", "/robots.txt", "/status/503"]
    first = records[0]
    assert first["host"] == "127.0.0.3" and first["url"] == page and first["page"] == 1
    assert first["status"] == 200 and first["bytes"] == len(body) == int(
        headers["Content-Length"])
    assert [r["if_none_match"] for r in records] == [False, True, False, False]
    assert records[3]["status"] == 503 and records[2]["url"] is None
    times = [r["sim_time"] for r in records]
    assert times == sorted(times)
    assert [json.loads(line) for line in log_path.read_text().splitlines()] == records
    truth = json.loads(truth_path.read_text())
    assert len(truth["pages"]) == 8 and truth["now"] == tb.sim_time()
    out, err = capfd.readouterr()
    assert err == "" and out == "", "the handler must not write per-request lines"


# ----- freshness ------------------------------------------------------------


def hand_truth():
    return {"now": 20.0, "pages": [
        {"url": "a", "weight": 3.0, "change_times": [2.0, 6.0]},
        {"url": "b", "weight": 1.0, "change_times": [5.0]},
    ]}


def test_weighted_freshness_hand_computed():
    """Page a (w=3) fetched at 1, 4, 7, changing at 2, 6: fresh on [1,2), [4,6), [7,8]
    = 4 of [0, 8]. Page b (w=1) fetched at 5 (a change time: it sees the new version) and
    failed at 0.5: fresh on [5, 8] = 3. Weighted: (3 * 4/8 + 1 * 3/8) / 4 = 0.46875."""
    log = [
        {"url": "a", "sim_time": 1.0, "status": 200},
        {"url": "b", "sim_time": 0.5, "status": 503},
        {"url": "a", "sim_time": 4.0, "status": 304},
        {"url": "b", "sim_time": 5.0, "status": 200},
        {"url": "a", "sim_time": 7.0, "status": 200, "method": "GET"},
        {"url": "b", "sim_time": 5.5, "status": 200, "method": "HEAD"},
        {"url": None, "sim_time": 3.0, "status": 200},
    ]
    assert weighted_freshness(hand_truth(), log, 0.0, 8.0) == pytest.approx(0.46875)
    assert freshness_by_page(hand_truth(), log, 0.0, 8.0) == pytest.approx(
        {"a": 0.5, "b": 0.375})
    pairs = [("a", 1.0), ("a", 4.0), ("a", 7.0), ("b", 5.0)]
    assert weighted_freshness(hand_truth()["pages"], pairs, 0.0, 8.0) == pytest.approx(0.46875)
    schedule = {"a": [7.0, 1.0, 4.0], "b": [5.0]}
    assert replay_policy(hand_truth(), schedule, 0.0, 8.0) == pytest.approx(0.46875)
    assert page_freshness([2.0, 6.0], [1.0, 4.0, 7.0], 3.0, 8.0) == pytest.approx(3 / 5)
    assert page_freshness([2.0], [], 0.0, 8.0) == 0.0


def test_freshness_rejects_bad_windows_and_urls():
    with pytest.raises(ValueError, match="t_end"):
        weighted_freshness(hand_truth(), [], 0.0, 30.0)
    with pytest.raises(ValueError, match="t_end"):
        weighted_freshness(hand_truth(), [], 5.0, 5.0)
    with pytest.raises(ValueError, match="not in the truth"):
        replay_policy(hand_truth(), {"zzz": [1.0]}, 0.0, 8.0)
    with pytest.raises(ValueError, match="intervals"):
        periodic_schedule({"a": 0.0}, 0.0, 8.0)


def test_page_freshness_matches_brute_force_grid():
    """Independent check: on a grid of step h, a copy is fresh when a fetch happened and the
    count of changes up to t equals the count up to the last fetch. The grid is wrong only
    within h of each fresh/stale transition, so the two agree within
    h * (number of transitions) / window."""
    rng = random.Random(5)
    for _ in range(50):
        changes = sorted(rng.uniform(0, 100) for _ in range(rng.randint(0, 15)))
        fetches = sorted(rng.uniform(-10, 100) for _ in range(rng.randint(0, 15)))
        t0, t1 = sorted(rng.uniform(0, 100) for _ in range(2))
        step = 0.001
        grid = np.arange(t0 + step / 2, t1, step)
        last = np.searchsorted(fetches, grid, side="right") - 1
        fetched = last >= 0
        last_time = np.asarray(fetches + [0.0])[last]
        changed = (np.searchsorted(changes, grid, side="right")
                   > np.searchsorted(changes, last_time, side="right"))
        brute = np.mean(fetched & ~changed)
        slack = step * (2 * len(fetches) + len(changes) + 2) / (t1 - t0)
        assert page_freshness(changes, fetches, t0, t1) == pytest.approx(brute, abs=slack)


def test_periodic_fetching_of_poisson_page_matches_closed_form():
    """seed 001 / docs/MATH.md, seeds 001-002: a Poisson page of rate lam fetched every t is fresh a
    fraction (1 - exp(-lam t)) / (lam t) of the time. 20000 intervals, each a bounded
    fraction with variance < 0.1: the sd of the mean is < 0.0023, so 0.01 is > 4 sd."""
    lam, interval, horizon = 1.0, 1.0, 20000.0
    changes = ChangeProcess("poisson", lam, "closed-form").times_until(horizon)
    truth = {"now": horizon, "pages": [{"url": "p", "weight": 1.0, "change_times": changes}]}
    schedule = periodic_schedule({"p": interval}, 0.0, horizon, seed=3)
    expected = (1 - math.exp(-lam * interval)) / (lam * interval)
    assert replay_policy(truth, schedule, 0.0, horizon) == pytest.approx(expected, abs=0.01)


def test_uniform_schedule_spends_the_budget():
    truth = {"now": 1000.0, "pages": [
        {"url": str(i), "weight": 1.0, "change_times": []} for i in range(10)]}
    schedule = uniform_schedule(truth, 0.5, 0.0, 1000.0, seed=1)
    assert set(schedule) == {str(i) for i in range(10)}
    inside = [t for times in schedule.values() for t in times if 0.0 <= t < 1000.0]
    assert abs(len(inside) - 0.5 * 1000.0) <= 10
    for times in schedule.values():
        assert -20.0 < times[0] <= 0.0
        assert statistics.pstdev(np.diff(times)) < 1e-9
    assert replay_policy(truth, schedule, 0.0, 1000.0) == 1.0


def test_crawl_log_scores_against_truth():
    """A live crawl of every page at two known times: freshness from the request log equals
    the freshness computed from the truth alone for the same fetch times."""
    clock = FakeClock()
    tb = Testbed(n_pages=10, n_hosts=2, acceleration=1.0, rate_min=0.005, rate_max=0.05,
                 clock=clock)
    with tb:
        start = clock.t
        for when in (10.0, 200.0):
            clock.t = start + when
            for i in range(10):
                fetch(tb.page_url(i))
        clock.t = start + 400.0
        truth = tb.truth()
        score = weighted_freshness(truth, tb.requests(), 50.0, 400.0)
        schedule = {p["url"]: [10.0, 200.0] for p in truth["pages"]}
        assert score == pytest.approx(replay_policy(truth, schedule, 50.0, 400.0))
        assert 0.0 < score < 1.0


# ----- command line ---------------------------------------------------------


def test_main_serves_and_writes_truth(tmp_path, capsys):
    truth_path = tmp_path / "truth.json"
    code = main(["--pages", "10", "--hosts", "2", "--duration", "0.2",
                 "--base-address", "127.0.0.9", "--truth", str(truth_path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert re.fullmatch(r"http://127\.0\.0\.9:\d+/", out[0])
    assert re.fullmatch(r"http://127\.0\.0\.10:\d+/", out[1])
    assert len(json.loads(truth_path.read_text())["pages"]) == 10
    assert main(["--base-address", "10.1.2.3"]) == 2
    assert "base_address" in capsys.readouterr().out


def test_module_entry_point_stops_on_sigterm_and_writes_truth(tmp_path):
    truth_path = tmp_path / "truth.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "frontier_rate.testbed", "--pages", "4", "--hosts", "2",
         "--truth", str(truth_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        urls = [proc.stdout.readline().strip() for _ in range(2)]
        assert all(re.fullmatch(r"http://127\.0\.0\.[23]:\d+/", url) for url in urls)
        assert fetch(urls[1])[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped at simulated t=" in out
    assert len(json.loads(truth_path.read_text())["pages"]) == 4


SPIDER = '''
import scrapy


class TestbedSpider(scrapy.Spider):
    name = "testbed"
    custom_settings = {
        "ROBOTSTXT_OBEY": True, "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False,
        "DOWNLOAD_DELAY": 0, "USER_AGENT": "testbed-check",
    }

    def __init__(self, seeds="", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = seeds.split(",")

    def parse(self, response):
        yield {"url": response.url, "status": response.status}
        yield from response.follow_all(css="a")
'''


def test_scrapy_crawl_discovers_pages_and_obeys_robots(tmp_path):
    """A real Scrapy crawl (subprocess) from the home pages finds every page on every
    host and, obeying robots.txt, never requests the disallowed private page."""
    spider, out = tmp_path / "spider.py", tmp_path / "items.jsonl"
    spider.write_text(SPIDER)
    with Testbed(n_pages=15, n_hosts=3, crawl_delays=[None, None, None]) as tb:
        result = subprocess.run(
            [sys.executable, "-m", "scrapy", "runspider", str(spider),
             "-a", "seeds=" + ",".join(tb.seed_urls()), "-o", str(out)],
            capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        crawled = {json.loads(line)["url"] for line in out.read_text().splitlines()}
        assert {tb.page_url(i) for i in range(15)} <= crawled
        paths = [(r["host"], r["path"]) for r in tb.requests()]
    assert not any(path.startswith("/private/") for _, path in paths)
    assert {host for host, path in paths if path == "/robots.txt"} == set(tb.addresses)
