"""Change detection cuts a page's UTF-8 bytes and decodes only the pieces it has not seen
(``fingerprint.utf8_body``, ``segments.VisibleMarkup``): the text it reads must be the text
the whole body decoded gives (``fingerprint._decode``), whatever the charset, and invalid
bytes next to a cut must be replaced as they are in the whole body."""

from __future__ import annotations

import random

from frontier_rate.detection.fingerprint import Fingerprinter, _decode, utf8_body
from frontier_rate.detection.segments import segments

TEXT = "<html><head><title>Prix · €</title></head><body><p>Ça coûte 10 € — naïve</p></body></html>"


def _bodies() -> list[tuple[bytes, dict[str, str]]]:
    """Bodies in charsets declared by the header, by a ``<meta>``, or not at all."""
    utf8 = TEXT.encode()
    cases = [
        (utf8, {"Content-Type": "text/html; charset=utf-8"}),
        (utf8, {"Content-Type": "text/html; charset=UTF8"}),
        (utf8, {"Content-Type": "text/html"}),  # none declared, valid UTF-8
        (TEXT.encode("ascii", "replace"), {"Content-Type": "text/html"}),
        (TEXT.encode("cp1252"), {"Content-Type": "text/html"}),  # none declared, invalid UTF-8
        (TEXT.encode("cp1252"), {"Content-Type": "text/html; charset=windows-1252"}),
        (TEXT.encode("latin-1", "replace"), {"Content-Type": "text/html; charset=iso-8859-1"}),
        (b'<meta charset="shift_jis">' + "<p>価格は十円</p>".encode("shift_jis"), {}),
        (TEXT.encode("utf-16"), {"Content-Type": "text/html; charset=utf-16"}),
        (utf8, {"Content-Type": "text/html; charset=no-such-charset"}),
        (TEXT.encode("cp1252"), {"Content-Type": "text/html; charset=idna"}),
        (b"<p>bad \xe2\x82</div><p>\xff\xfe tail \xc3</p>", {"Content-Type": "text/html; charset=utf-8"}),
        (b"<p>bad \xe2\x82</div><p>\xff tail</p>", {"Content-Type": "text/html"}),
    ]
    return cases


def test_the_utf8_body_reads_as_the_decoded_body() -> None:
    """Each body's UTF-8 form, decoded, is the text ``_decode`` gives for it; a body that is
    UTF-8 already is passed on as it is (not decoded and encoded again)."""
    for body, headers in _bodies():
        assert utf8_body(body, headers).decode("utf-8", "replace") == _decode(body, headers), \
            (body[:40], headers)
    body = TEXT.encode()
    assert utf8_body(body, {"Content-Type": "text/html; charset=utf-8"}) is body


def test_invalid_bytes_next_to_a_cut_read_as_in_the_whole_decoded_page() -> None:
    """Seeded documents glued from cuts ("</div>", scripts, comments, block tags) and invalid
    or truncated UTF-8 sequences: the segments of the bytes, cut first and each chunk decoded
    alone, are those of the whole document decoded first."""
    rng = random.Random(61)
    pieces = [b"</div>", b"<div>", b"<p>", b"<script>x</script>", b"<!-- c -->", b"text ",
              b"\xe2\x82", b"\xff", b"\xc3", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f", b"<b>",
              b"</b>", b"&amp;", b"\x00", b"<title>\xe2\x82</title>"]
    for _ in range(2000):
        document = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        whole = document.decode("utf-8", "replace")
        assert segments(document) == segments(whole), document


def test_a_page_reads_the_same_through_the_text_path_and_the_bytes_path() -> None:
    """A strip pattern that matches nothing sends a page through the decoded text
    (``_decode``, then encoded again); without one the body is cut as it is: both give the
    same fingerprints over a page's revisits, in every charset above."""
    for body, headers in _bodies():
        plain, through_text = Fingerprinter("content"), Fingerprinter("content", ["NO-SUCH-TEXT"])
        for n in range(3):
            copy = body.replace(b"</html>", b"<p>" + str(n).encode() * 20 + b"</p></html>")
            url = "http://charset.test/page"
            assert plain.detect(copy, url, headers) == through_text.detect(copy, url, headers), \
                (body[:40], headers, n)

