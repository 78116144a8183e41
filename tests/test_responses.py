"""responses.outcome: one answer becomes the same evidence in both adapters."""

from __future__ import annotations

from frontier_rate.crawl.responses import content_length, outcome
from frontier_rate.detection.fingerprint import Fingerprinter
from frontier_rate.engine.frontier import Lease

LEASE = Lease(url="http://a.test/p", token="3", host="a.test", etag='"old"',
                 last_modified="Mon, 01 Jan 2024 00:00:00 GMT")
RAW = Fingerprinter("raw")


def test_a_2xx_is_observed_with_its_fingerprint_validators_and_date() -> None:
    headers = {"ETag": '"v2"', "Date": "Tue, 02 Jan 2024 00:00:00 GMT"}
    got = outcome(LEASE, 200, headers, b"<p>x</p>", LEASE.url, RAW, 10.0)
    assert got.kind == "observe" and not got.not_modified
    assert got.args == {"status": 200, "fetched_at": 10.0, "etag": '"v2"', "last_modified": None,
                        "served_at": "Tue, 02 Jan 2024 00:00:00 GMT",
                        "fingerprint": RAW(b"<p>x</p>", LEASE.url, headers)}


def test_a_304_keeps_the_lease_validators_it_does_not_repeat() -> None:
    got = outcome(LEASE, 304, {}, b"", LEASE.url, RAW, 5.0)
    assert got.kind == "observe" and got.not_modified and "fingerprint" not in got.args
    assert (got.args["etag"], got.args["last_modified"]) == (LEASE.etag, LEASE.last_modified)


def test_other_statuses_are_failures() -> None:
    for status in (404, 410, 500, 301):
        got = outcome(LEASE, status, {}, b"", LEASE.url, RAW, 1.0)
        assert (got.kind, got.args) == ("failed", {"reason": f"HTTP {status}", "status": status})


def test_a_validator_that_cannot_be_sent_back_is_reported_not_kept() -> None:
    bad = "x\r\ninjected"
    got = outcome(LEASE, 200, {"ETag": bad}, b"a", LEASE.url, RAW, 1.0)
    assert got.args["etag"] is None and got.bad_validators == [("ETag", bad)]


def test_a_cut_body_is_fingerprinted_with_its_declared_length() -> None:
    headers = {"Content-Length": "1000"}
    cut = outcome(LEASE, 200, headers, b"abc", LEASE.url, RAW, 1.0, truncated=True)
    assert cut.args["fingerprint"] == RAW(b"abc", LEASE.url, headers, truncated=True,
                                         full_length=1000)
    assert cut.args["fingerprint"] != outcome(LEASE, 200, headers, b"abc", LEASE.url, RAW,
                                              1.0).args["fingerprint"]
    assert [content_length({"Content-Length": v}) for v in ("12", "-1", "x")] == [12, None, None]
