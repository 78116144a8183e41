"""The text a page's content is judged on (``change_detection``, the ``"content"`` mode): the
visible text cut into block segments, volatile fragments (tokens, timestamps, relative times,
counters) removed (each then hashed by ``segment_hashes``). Linear-time regular expressions
over the page's UTF-8 bytes, no HTML parser.
"""

from __future__ import annotations

import html
import re
from itertools import accumulate, chain

from frontier_rate.detection.bounded_cache import cached, once_table


def alternation(names: list[str]) -> str:
    """A regex matching exactly one of ``names`` (plain words), written as a trie: shared
    prefixes are factored out (``s(?:cript|tyle)``). sre tries the alternatives of a group
    one by one at each place, so at each ``<`` of a page a trie tries a few branches
    instead of every name (the tag patterns below: ~12% and ~24% faster on real pages)."""
    words = sorted(set(names))
    optional = "" in words
    groups: dict[str, list[str]] = {}
    for word in words:
        if word:
            groups.setdefault(word[0], []).append(word[1:])
    branches = [re.escape(first) + alternation(rests) for first, rests in groups.items()]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 and not optional else "(?:" + "|".join(branches) + ")"
    return body + "?" if optional else body


# The rest of a tag never spans a "<" or ">": each pattern is linear in the body (an
# unclosed tag fails at the next "<"). A quoted attribute value holding "<" or ">" is made
# plain first (``_plain_values``). The patterns over the whole document read its UTF-8
# bytes (``VisibleMarkup``): tag names and the characters that cut are ASCII, and a
# pattern over bytes reads one byte a character (a decoded page is 1, 2 or 4 bytes a
# character); the text of each piece is decoded only when not in the caches.
_ATTRIBUTES = r"[^<>]*"
_MARKUP_IN_VALUE = re.compile(rb"""=\s*(?:"[^"<>]*[<>][^"]*"|'[^'<>]*[<>][^']*')""")
_IN_TAG = re.compile(rb"<[A-Za-z][^<>]*")
_TAG_REST = re.compile(rb"""(?:[^<>"']|"[^"]*"|'[^']*')*""")  # each branch by its 1st char
LOOK_BACK = LOOK_AHEAD = 4096
"""How far (in bytes) before a quoted value holding markup its tag's "<" is looked for, and
how far after it the tag's ">"."""
_DROPPED = ("script", "style", "template", "noscript", "svg", "head", "select", "textarea")
# Over bytes, case folding is ASCII's: "<ſcript>" (U+017F) is no script tag
_DROP_START = re.compile((r"<(?:!--|(" + alternation(list(_DROPPED)) + r")\b" + _ATTRIBUTES
                          + ">)").encode(), re.I)
_DROP_END = {name.encode(): re.compile(rb"</" + name.encode() + rb"\s*>", re.I)
             for name in _DROPPED}
_TITLE = re.compile((r"<title\b" + _ATTRIBUTES + r">([^<]*)").encode(), re.I)
_BLOCK_TAGS = (
    "address article aside blockquote body br button caption dd details dialog div dl dt "
    "fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hr html iframe img input "
    "label legend li main menu nav ol option p pre section summary table tbody td tfoot th "
    "thead title tr ul").split()
# Both spellings instead of re.I: the case-insensitive alternation took twice as long.
_BLOCK = re.compile(r"</?" + alternation(_BLOCK_TAGS + [tag.upper() for tag in _BLOCK_TAGS])
                    + r"\b" + _ATTRIBUTES + r">")
_TAG = re.compile(r"<[A-Za-z/!?][^<>\x00]*>")  # never across a cut (NUL)
_SPACE = re.compile(r"\s+")

_MONTHS = (
    r"jan(?:uary|vier|uar|\.)?|feb(?:ruary|ruar|\.)?|f[ée]v(?:rier|\.)?|m[aä]r(?:ch|s|z|\.)?|"
    r"apr(?:il|\.)?|avr(?:il|\.)?|ma[iy]|june?|juin|juni|july?|juil(?:let|\.)?|juli|"
    r"aug(?:ust|\.)?|ao[uû]t|sep(?:t(?:ember|embre)?|\.)?|oct(?:ober|obre|\.)?|okt(?:ober)?|"
    r"nov(?:ember|embre|\.)?|d[eé]c(?:ember|embre|\.)?|dez(?:ember)?|"
    r"enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre|"
    r"gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|dicembre")
# Volatile fragments. The pattern begins with the set of characters a fragment can start
# with, so that sre skips every other position in C (an alternation that begins with "\b"
# is tried at every position: 2.7x slower on the corpus); "\b" is then the character
# before that first one not being a word character, and each alternative says which
# first character it takes with a lookbehind, in the order of the alternation it
# replaces (the same matches at every position).
_VOLATILE_FIRST = r"[\dvihfjgàa]"
_VOLATILE_ALTERNATIVES = (
    # relative times: "5 min ago", "vor 18 Min", "il y a 3 heures", "hace 2 días", "fa 2 ore"
    r"(?<=\d)\d*\s*(?:s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|"
    r"weeks?|months?|y|yrs?|years?)\s+ago\b",
    r"(?:(?<=v)or|(?<=i)l\s+y\s+a|(?<=h)ace|(?<=f)a|(?<=h)á)\s+\d+\s*\w{1,9}\b",
    r"(?:(?<=j)ust\s+now|(?<=g)erade\s+eben|(?<=[àa])\s+l'instant)\b",
    # consent banners' partner counts ("we and our 113 partners", "67 partners can use")
    r"(?<=\d)\d*\s+(?:partners|vendors|partenaires|partner)\b",
    # clock times and ISO timestamps
    r"(?<=\d)\d{3}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b",
    r"(?<=\d)\d?:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?m\.?)?\b",
    # epoch seconds, milli- and nanoseconds, numeric ids: 10 digits and more
    r"(?<=\d)\d{9,}\b",
)
_VOLATILE = re.compile(_VOLATILE_FIRST + r"(?<!\w" + _VOLATILE_FIRST + ")(?:"
                       + "|".join(_VOLATILE_ALTERNATIVES) + ")")
# The same without the two alternatives that start with a letter: where none of their
# words is in the text, it masks what ``_VOLATILE`` masks, and sre stops only at digits
# (~2.4x faster on a text-heavy page, where "a", "i", "h" ... are a quarter of the text).
_VOLATILE_DIGITS = re.compile(r"\d(?<!\w\d)(?:" + "|".join(
    alternative for alternative in _VOLATILE_ALTERNATIVES if alternative.startswith(r"(?<=\d)"))
    + ")")
LETTER_WORDS = ("vor ", "il y a ", "hace ", "fa ", "há ", "just now", "gerade eben", "l'instant")
"""What a fragment starting with a letter holds, written with single spaces: text whose
only white space is single spaces and holds none of them has no such fragment."""
_WORD = re.compile(r"[a-z0-9_\-+/=.]{10,}")
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[a-z]")
_DATE = re.compile(
    r"\b\d{1,2}(?:st|nd|rd|th|er|\.)?\s+(?:" + _MONTHS + r")\s*,?\s+\d{2,4}\b|"
    r"\b(?:" + _MONTHS + r")\s+\d{1,2}(?:st|nd|rd|th)?\s*,?\s+\d{2,4}\b|"
    r"\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b")
MASK_DATES = False
"""Written dates ("2 February 2026", "02/02/2026") are kept: on legal pages the date of
a version is content (measured: masking them missed more real changes and removed no
false ones on the corpus). ISO timestamps and clock times are always masked."""
_COUNTER = re.compile(
    r"\d(?<![\d.,]\d)[\d.,]*\s?[km]?\+?\s*(?:comments?|views?|likes?|shares?|followers?|"
    r"reactions?|replies|repl(?:y|ies)|votes?|points?|reviews?|ratings?|reads?|kommentare?|"
    r"aufrufe|commentaires?|vues|comentarios?|visitas|commenti|visualizzazioni)\b")
_COUNT_WORDS = (r"comments?|views?|likes?|shares?|followers?|reactions?|replies|votes?|points?|"
                r"reviews?|ratings?|reads?|kommentare?|aufrufe|commentaires?|vues|comentarios?|"
                r"visitas|commenti|visualizzazioni")
# "\b" first: tried at every position, but its alternatives only at a word's start (written
# with ``word_start``, below, it was no faster: many characters start one of its words)
_COUNTER_AFTER = re.compile(r"\b(?:" + _COUNT_WORDS + r")\s*[:(\[]?\s*\d[\d.,]*\s?[km]?\+?[)\]]?")
"""A count after its word ("Comments (72)", "views: 1.2k"): volatile as ``_COUNTER``'s."""
_BADGE = re.compile(r"[\s(]*\d[\d.,]*\s?[km]?\+?[\s)]*")
"""Counters: a number of comments, views, likes ... anywhere (``_COUNTER``, its first
character a digit: see ``_VOLATILE``), and a segment that is only a number, a badge
(``_BADGE``, matched whole). Other numbers count: "30 days", "Story number 5", "version 2"."""

_WALL = re.compile(
    r"captcha|are you (?:a )?(?:human|robot)|verify (?:that )?you are (?:a )?human|"
    r"just a moment|checking (?:if the site connection is secure|your browser)|"
    r"attention required|pardon our interruption|unusual traffic|access denied|"
    r"request (?:was )?blocked|enable (?:javascript|cookies) (?:and|to) (?:continue|proceed)|"
    r"bot (?:detection|protection)|ddos protection")
_ERROR = re.compile(
    r"\b(?:404|403|500|502|503|not found|forbidden|error|unavailable|too many requests|"
    r"introuvable|nicht gefunden|fehler|erreur)\b")
"""``_WALL`` and ``_ERROR`` are searched in lower-cased text: without ``re.I`` sre skips
the positions where no alternative can start (the case-insensitive search took ~100 us
on a 1.4 KB page)."""
_HTML_SNIFF = re.compile(rb"^\s*(?:<!doctype\s+html|<html|<head|<body|<!--|<meta|<div|<p\b)",
                         re.I)


def is_html(body: bytes, content_type: str | None) -> bool:
    """True for an HTML body: the Content-Type says so, or (none given) it starts like one."""
    if content_type:
        lowered = content_type.lower()
        return "html" in lowered
    return bool(_HTML_SNIFF.match(body[:512]))


def _shown(markup: bytes) -> list[bytes]:
    """The parts of ``markup`` between comments and the elements that show no text
    (``_DROPPED``), each of which is cut from its start tag to its end tag (or to the end of
    the document when unclosed), and is a cut in the text. Linear: every search starts where
    the previous one ended."""
    pieces = []
    position = 0
    while True:
        found = _DROP_START.search(markup, position)
        if found is None:
            break
        pieces.append(markup[position:found.start()])
        name = found.group(1)
        if name is None:
            stop = markup.find(b"-->", found.end())
            position = len(markup) if stop < 0 else stop + 3
        else:
            closing = _DROP_END[name.lower()].search(markup, found.end())
            position = len(markup) if closing is None else closing.end()
    pieces.append(markup[position:])
    return pieces


def _plain_values(markup: bytes) -> bytes:
    """``markup`` with the "<" and ">" inside its tags' quoted attribute values made spaces,
    so that the tag patterns read each such tag whole, as a browser does: a tooltip's
    ``title="Wien<br>USA"``, Alpine.js's ``@click="() => open"`` or a ``data-`` attribute's
    JSON left its tail as text ("USA: Manassas\">": 2 of html-corpus-v3's 75 shop revisits
    called changed when a tooltip gained a line). A value is taken only inside a tag
    (its "<" at most ``LOOK_BACK`` characters back) that ends after it (within
    ``LOOK_AHEAD``): an unclosed quote is left as before. Linear: each character is read by
    at most one scan of a tag's rest; a value holding no markup costs one search."""
    found = _MARKUP_IN_VALUE.search(markup)
    if found is None:
        return markup
    parts: list[bytes] = []
    position = 0
    while found is not None:
        start, end = found.span()
        opening = markup.rfind(b"<", max(position, start - LOOK_BACK), start)
        if opening >= 0 and _IN_TAG.fullmatch(markup, opening, start):
            rest = _TAG_REST.match(markup, end, end + LOOK_AHEAD).end()
            if markup.startswith(b">", rest):
                parts += (markup[position:start],
                          markup[start:rest].replace(b"<", b" ").replace(b">", b" "))
                position = rest
            end = rest  # a later value before it is in this tag, or fails where it did
        found = _MARKUP_IN_VALUE.search(markup, end)
    parts.append(markup[position:])
    return b"".join(parts)


NORMAL_CACHE = 100_000
"""Pieces of a document between two block tags whose text is remembered (most of a page's
repeat from fetch to fetch); the cache starts afresh when full."""
_normal: dict[int, str] = {}
_normal_once = once_table(1 << 17)


def segments(markup: str | bytes) -> list[str]:
    """The visible text of ``markup`` (text, or its UTF-8 bytes) cut at block-level elements,
    whitespace collapsed, empty segments dropped (volatile fragments still in):
    ``VisibleMarkup(markup).segments()``."""
    return VisibleMarkup(markup).segments()


def utf8(markup: str | bytes) -> bytes:
    """``markup`` as UTF-8 bytes (the text's lone surrogates, if any, passed through)."""
    return markup.encode("utf-8", "surrogatepass") if isinstance(markup, str) else markup


class VisibleMarkup:
    """A document (text, or its UTF-8 bytes) cut at its hidden elements (``_shown``) and each
    part at ``CHUNK_CUT``, all in C over the bytes, nothing decoded but the title.

    ``segments()`` then cuts its chunks at their block tags in C (no copy of the document); each
    chunk's texts are read from a bounded cache keyed by its bytes' hash, and decoded and worked
    out (its inline tags removed, character references decoded, white space collapsed) only
    for the chunks not seen before: a revisit's Python work is a few C-level passes over its
    pieces, not over its text. Only a part (between two hidden elements) whose text holds what
    a tag with markup in a quoted value leaves (``_TAG_LEFT``) is cut again with such values
    made plain (``_plain_values``: 0.65 ms a page of html-corpus-v3 if done on every page;
    each part's texts of that cut are cached too, ``_plain_texts``).

    ``key``: a hash of the title, the chunks and the parts' chunk counts, of which the
    segments are a function: two copies with one key show the same segments (what differed
    was in scripts, styles, comments, the head), which ``ContentDetector`` uses to take a
    copy for the last one without cutting it further (issue 59: 31% of html-corpus-v3's
    revisits). A Python ``hash``: for one process's memory, never stored."""

    __slots__ = ("title", "shown", "chunks", "counts", "keys")

    def __init__(self, markup: str | bytes) -> None:
        markup = utf8(markup)
        found = _TITLE.search(markup)
        self.title = None if found is None else \
            " ".join(html.unescape(found.group(1).decode("utf-8", "replace")).split())
        self.shown = _shown(markup.replace(b"\x00", b" ") if b"\x00" in markup else markup)
        self.chunks: list[bytes] = []
        self.counts: list[int] = []
        for part in self.shown:
            cut = part.split(CHUNK_CUT)
            self.chunks += cut
            self.counts.append(len(cut))
        self.keys = list(map(hash, self.chunks))

    @property
    def key(self) -> int:
        return hash((self.title, tuple(self.keys), tuple(self.counts)))

    def segments(self) -> list[str]:
        by_chunk = _chunk_texts(self.chunks, self.keys)
        found = list(chain.from_iterable(by_chunk))
        if _LEFT_MARK in "".join(found):
            found = _plain_where_left(self.shown, by_chunk, self.counts)
        if self.title is not None:
            found.insert(0, self.title)
        return list(filter(None, found))


_TAG_LEFT = ('="', "='", '">', "'>")
"""What a tag whose quoted value holds "<" or ">" leaves in the text (its start, or its
tail after the ">" in the value), with the "<" or ">"; plain text seldom holds it."""
_LEFT_MARK = "\x00"
"""Starts the cached text of a piece holding ``_TAG_LEFT``: NUL, which no text holds
(``segments`` replaces it in the markup), found in a page's texts by one C search."""


CHUNK_CUT = b"</div>"
"""Where the parts of a document are first cut, by a plain search in C: an end tag that is
itself a block tag (so a cut there is one ``_BLOCK`` makes too), on most pages every few
hundred bytes."""
CHUNK_CACHE = 20_000
"""Chunks of documents (the parts between two ``CHUNK_CUT``) whose texts are remembered;
the cache starts afresh when full."""
_chunks: dict[int, list[str]] = {}
_chunks_once = once_table(1 << 15)


def _texts(shown: list[bytes]) -> list[str]:
    """The text of each piece of the ``shown`` parts cut at block tags (``_chunk_texts``)."""
    chunks = [chunk for part in shown for chunk in part.split(CHUNK_CUT)]
    return list(chain.from_iterable(_chunk_texts(chunks, list(map(hash, chunks)))))


def _chunk_texts(chunks: list[bytes], keys: list[int]) -> list[list[str]]:
    """The texts of the pieces of each of ``chunks`` (UTF-8; ``keys``: their hashes) cut at
    block tags. A chunk seen before gives its texts from a bounded cache keyed by its hash, so
    a revisit decodes and runs the block-tag pattern only over the chunks that changed.
    Exact: no ``_BLOCK`` match spans a ``CHUNK_CUT`` (a tag's rest holds no "<"), so each
    chunk's pieces are those the whole part's cut gives; and a cut at an ASCII byte is never
    inside a character, so each chunk decodes as it does within the whole document (an
    invalid sequence before the cut is replaced as it was)."""

    def work(missing: list[int]) -> list[list[str]]:
        pieces = [_BLOCK.split(chunks[i].decode("utf-8", "replace")) for i in missing]
        # most chunks new (a first copy, a rewrite): its pieces would mostly miss the piece
        # cache, and hashing them for it made the largest first copies ~15% slower
        read = _pieces_text if 2 * len(missing) > len(keys) else _piece_texts
        texts = read(list(chain.from_iterable(pieces)))
        ends = list(accumulate(map(len, pieces)))
        return list(map(texts.__getitem__, map(slice, [0, *ends[:-1]], ends)))

    return cached(_chunks, CHUNK_CACHE, keys, work, _chunks_once)


def _plain_where_left(shown: list[bytes], by_chunk: list[list[str]],
                      chunk_counts: list[int]) -> list[str]:
    """The texts of the ``shown`` parts (``by_chunk``: ``_chunk_texts``, ``chunk_counts``
    chunks a part), each part whose texts hold ``_LEFT_MARK`` cut again with its quoted
    values made plain (``_plain_texts``). A part whose texts hold no mark has no tag with markup in a value
    (such a tag always leaves a ``_TAG_LEFT``), so its texts are those of the plain cut: a
    front page of 2 MiB with one such tooltip cuts one part again, not ~700."""
    found: list[str] = []
    end = 0
    for part, count in zip(shown, chunk_counts, strict=True):
        texts = list(chain.from_iterable(by_chunk[end:end + count]))
        end += count
        if _LEFT_MARK in "".join(texts):
            texts = [text.lstrip(_LEFT_MARK) for text in _plain_texts([part])]
        found += texts
    return found


PLAIN_CACHE = 5_000
"""Parts of documents whose texts with quoted values made plain are remembered."""
_plains: dict[int, list[str]] = {}
_plains_once = once_table(1 << 13)


def _plain_texts(shown: list[bytes]) -> list[str]:
    """``_texts`` of the ``shown`` parts with their quoted values made plain
    (``_plain_values``), each part's from a bounded cache keyed by its hash: a revisit of
    a page with such a tag searches only its parts that changed for values holding markup
    (the search over a 750 KiB page took a third of its detection). Exact: ``_texts`` of
    several parts is the texts of each part in turn (no chunk spans two parts)."""
    return list(chain.from_iterable(cached(
        _plains, PLAIN_CACHE, list(map(hash, shown)),
        lambda missing: [_texts([_plain_values(shown[i])]) for i in missing],
        _plains_once)))


def _piece_texts(pieces: list[str]) -> list[str]:
    """The text of each piece of markup between two block tags, from the cache when the
    piece was seen before."""
    return cached(_normal, NORMAL_CACHE, list(map(hash, pieces)),
                  lambda missing: _pieces_text(list(map(pieces.__getitem__, missing))),
                  _normal_once)


def _pieces_text(pieces: list[str]) -> list[str]:
    """The visible text of each piece of markup between two block tags, white space
    collapsed ("" for none): inline tags and character references in one pass over the
    pieces joined (no piece holds a NUL: they were cut there). A text holding what a tag
    with markup in a quoted value leaves starts with ``_LEFT_MARK``."""
    text = _TAG.sub(" ", "\x00".join(pieces))
    left = ("<" in text or ">" in text) and any(map(text.__contains__, _TAG_LEFT))
    if left:  # rare: which pieces, before references are decoded (&quot;> is text)
        marks = [any(map(part.__contains__, _TAG_LEFT)) for part in text.split("\x00")]
    if "&" in text:
        text = html.unescape(text)
    texts = [" ".join(part.split()) for part in text.split("\x00")]
    if left:
        texts = [_LEFT_MARK + t if mark else t for t, mark in zip(texts, marks, strict=True)]
    return texts


def stable_segments(parts: list[str], earlier: bool = False) -> list[str]:
    """``parts`` without their volatile fragments (see the module docstring), letter case and
    all: a part with one comes back with each fragment replaced by its token (``<d>``,
    ``<v>``, ``<t>``, ``<n>``), the rest of its letters as they were (``_recased``); the
    others as they were (a re-cased title is an edit of the text, in a thesis entry with a
    DOI as in a paragraph; issue 59).

    Every volatile pattern needs a digit, except three plain words (``UNDATED_WORDS``),
    and none spans the NUL between two segments: so only the segments holding a digit
    or one of those words are masked, in one pass of each pattern over them joined. The
    others are returned as they are (on real pages about two thirds of the text:
    half the time of a first copy's masking). ``earlier``: as page memories of
    ``page_memory.EARLIER_HASHING`` hashed the parts (a part with a fragment all lower-cased,
    a copyright line's numbers kept).
    """
    text = "\x00".join(parts).lower()
    words = [word for word in UNDATED_WORDS if word in text]
    if not words and _DIGIT.search(text) is None:
        return list(parts)
    lowered = text.split("\x00")
    kept = list(parts)
    search = _DIGIT.search
    volatile = [i for i, part in enumerate(lowered)
                if search(part) is not None or (words and any(word in part for word in words))]
    for i, part in zip(volatile, _masked("\x00".join([lowered[i] for i in volatile]),
                                         copyright_numbers=not earlier), strict=True):
        if part != lowered[i]:
            kept[i] = part if earlier else _recased(part, lowered[i], parts[i])
    return kept


_TOKEN = re.compile(r"<[dvnt]>")
"""The tokens ``_masked`` puts in place of a volatile fragment."""


def _recased(masked: str, lowered: str, part: str) -> str:
    """``masked`` (``lowered`` with volatile fragments replaced by tokens) with the letters
    of ``part`` (``lowered``'s original) back in their case. The text between two tokens is
    found in ``lowered`` from where the last ended (the patterns only replace, never move
    text), and taken from ``part`` at the same place. A part whose lower-casing changed
    its length (a few letters, such as the dotted I, lower-case to two characters) stays
    lower-cased, as before: the same part always gives the same text either way."""
    if len(lowered) != len(part):
        return masked
    out: list[str] = []
    position = 0
    for piece, token in zip(_TOKEN.split(masked), [*_TOKEN.findall(masked), ""], strict=True):
        found = lowered.find(piece, position) if piece else position
        if found < 0:  # not found in order (cannot happen by the above): as before
            return masked
        out.append(part[found:found + len(piece)])
        out.append(token)
        position = found + len(piece)
    return "".join(out)


_RELATIVE_WORDS = ("ago", "yesterday", "today", "week", "hour", "gestern", "heute", "aujourd")
"""Words one of which every ``_RELATIVE_DAY`` match holds."""
UNDATED_WORDS = ("just", "gerade", "l'instant", *_RELATIVE_WORDS)
"""Words of the volatile fragments without a digit ("just now", "gerade eben", "à l'instant",
and ``_RELATIVE_DAY``'s "an hour ago", "updated yesterday", "this week"): a segment holding
one is masked even without a digit."""


def word_start(alternatives: list[str]) -> str:
    """A regex matching what ``\\b(?:A|B|...)`` matches, ``alternatives`` being regexes that
    each start with a plain lower-case letter: written to start with the set of those first
    letters, so that sre skips every other position in C (a pattern that starts with
    ``\\b`` is tried at every position), "\\b" then the character before it not being a
    word character, and each alternative checking its first letter with a lookbehind, in
    the order given (the same match at every position)."""
    firsts = "".join(sorted({alternative[0] for alternative in alternatives}))
    return (f"[{firsts}](?<!\\w[{firsts}])(?:"
            + "|".join(f"(?<={alternative[0]}){alternative[1:]}" for alternative in alternatives)
            + ")")


_UNITS = r"\s+(?:seconds?|minutes?|mins?|hours?|days?|weeks?|months?|years?)\s+ago\b"
_RELATIVE_DAY = re.compile(word_start([
    "an?" + _UNITS, "one" + _UNITS, "a few" + _UNITS,
    r"in\s+the\s+(?:last|past)\s+hour\b", r"last\s+hour\b", r"past\s+hour\b",
    r"yesterday\b", r"today\b", r"this\s+week\b", r"last\s+week\b", r"gestern\b", r"heute\b",
    r"aujourd'hui\b"]))
"""Relative times without a digit: "an hour ago", "a few minutes ago", "in the last hour",
"updated yesterday", "today", "this week", "gestern", "heute", "aujourd'hui" (issue 59: a help
centre's "Updated yesterday" read "Updated this week" on the next fetch). Applied only to
text holding one of ``_RELATIVE_WORDS``."""


COPYRIGHT_LINE = 120
"""The longest segment whose numbers are a copyright notice's (``_copyright_numbers``)."""
_COPYRIGHT_MARKS = ("©", "copyright", "(c) 19", "(c) 20", "(c)19", "(c)20")
_COPYRIGHT_NUMBER = re.compile(r"(?<![\d.])\d+(?:\.\d+)*")


def _copyright_numbers(text: str) -> str:
    """The NUL-joined lower-case segments ``text`` with the numbers of each copyright line
    volatile (its years, a build's version): a segment of at most ``COPYRIGHT_LINE``
    characters with "©", "copyright", or "(c)" before a year (not a list's third item).
    "© 2025 Hily. All rights reserved" reads "© 2026 Hily ..." on January 1st, on every
    page of the site, and "©mektoube.fr - 2023 - 2.0.32" turns "2.1.5" at a release: no
    change of any page. A longer segment (a licence clause that names a year) keeps its
    numbers."""
    if not any(mark in text for mark in _COPYRIGHT_MARKS):
        return text
    parts = text.split("\x00")
    for i, part in enumerate(parts):
        if len(part) <= COPYRIGHT_LINE and any(mark in part for mark in _COPYRIGHT_MARKS):
            parts[i] = _COPYRIGHT_NUMBER.sub("<v>", part)
    return "\x00".join(parts)


def _masked(text: str, copyright_numbers: bool = True) -> list[str]:
    """The NUL-joined lower-case segments ``text`` with each pattern applied once, split
    (``copyright_numbers``: a copyright line's numbers too, ``_copyright_numbers``)."""
    if copyright_numbers:
        text = _copyright_numbers(text)
    if MASK_DATES:
        text = _DATE.sub("<d>", text)
    text = _WORD.sub(_token, text)
    text = (_VOLATILE_DIGITS if _single_spaced(text) and
            not any(word in text for word in LETTER_WORDS) else _VOLATILE).sub("<v>", text)
    if any(word in text for word in _RELATIVE_WORDS):
        text = _RELATIVE_DAY.sub("<v>", text)
    text = _COUNTER.sub("<n>", text)
    text = _COUNTER_AFTER.sub("<n>", text)
    return ["<n>" if _BADGE.fullmatch(part) else part for part in text.split("\x00")]


def _single_spaced(text: str) -> bool:
    """True when the NUL-joined ``text``'s only white space is single U+0020 spaces (every
    other white space character is not printable), as ``segments`` writes it."""
    return "  " not in text and text.replace("\x00", " ").isprintable()


def _token(match: re.Match[str]) -> str:
    """A long word with digits and letters (hex id, UUID, nonce, trace id) is volatile."""
    word = match.group(0)
    if word.isalpha():  # the common case, a long plain word, without two searches
        return word
    if _DIGIT.search(word) is not None and _LETTER.search(word) is not None:
        return "<t>"
    return word
