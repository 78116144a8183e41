"""One name per concept (issue 61, docs/ARCHITECTURE.md "One name per concept"): the retired
names still import, with a DeprecationWarning naming the new one, and the package's own code
never uses them."""

from __future__ import annotations

import importlib
import io
import re
import tokenize
import warnings
from pathlib import Path

import pytest

from frontier_rate import renamed

PACKAGE = Path(__file__).resolve().parents[1] / "frontier_rate"

RETIRED = [  # (module, old name, new name)
    ("frontier_rate", "Dispatch", "Lease"),
    ("frontier_rate.engine", "Dispatch", "Lease"),
    ("frontier_rate.engine.frontier", "Dispatch", "Lease"),
    ("frontier_rate.engine.records", "Dispatch", "Lease"),
    ("frontier_rate.engine.leases", "Dispatcher", "LeaseDesk"),
    ("frontier_rate.scrapy.requests", "NewPage", "RequestPage"),
    ("frontier_rate.client.calls", "failure_reason", "status_reason"),
    ("frontier_rate.client.frontier_client", "failure_reason", "status_reason"),
    ("frontier_rate.client.calls", "Hint", "Claim"),
    ("frontier_rate.client.calls", "hint_call", "claim_call"),
    ("frontier_rate.crawl.signal_sources", "hints", "claims_of"),
    ("frontier_rate.crawl.scrapy_compat", "failure_reason", "exception_reason"),
    ("frontier_rate.frontera.requests", "DISPATCH_KEY", "LEASE_KEY"),
    ("frontier_rate.frontera", "DISPATCH_KEY", "LEASE_KEY"),
]

MOVED = [  # (old module, a name, where it lives now): issue 59, detection left crawl/
    ("frontier_rate.crawl.fingerprint", "Fingerprinter", "frontier_rate.detection.fingerprint"),
    ("frontier_rate.crawl.fingerprint", "fingerprint", "frontier_rate.detection.fingerprint"),
    ("frontier_rate.crawl.fingerprint", "clean_validator", "frontier_rate.crawl.responses"),
    ("frontier_rate.crawl.change_detection", "ContentDetector",
     "frontier_rate.detection.change_detection"),
    ("frontier_rate.crawl.content_rules", "ContentRule", "frontier_rate.detection.content_rules"),
    ("frontier_rate.crawl.segments", "segments", "frontier_rate.detection.segments"),
    ("frontier_rate.crawl.host_mask", "HostMask", "frontier_rate.detection.host_mask"),
    ("frontier_rate.crawl.page_memory", "PageMemory", "frontier_rate.detection.page_memory"),
    ("frontier_rate.crawl.detection_record", "explain", "frontier_rate.detection.detection_record"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_a_moved_module_still_imports_each_name_with_a_warning_naming_its_home(old, name, new):
    loaded = importlib.import_module(old)
    renamed.WARNED.discard((old, name))
    with pytest.warns(DeprecationWarning, match=rf"{re.escape(old)}\.{name} is moved to "
                                                rf"{re.escape(new)}\.{name}"):
        value = getattr(loaded, name)
    assert value is getattr(importlib.import_module(new), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: a second use does not warn again
        assert getattr(loaded, name) is value
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        loaded.Nothing  # noqa: B018


def test_the_package_imports_no_moved_path():
    """The package's own code imports the detection from ``frontier_rate.detection``."""
    moved = {old.rpartition(".")[2] for old, _, _ in MOVED}
    pattern = re.compile(rf"frontier_rate\.crawl(?:\.| import )({'|'.join(moved)})\b")
    found = [f"{path.relative_to(PACKAGE)}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.parent.name != "crawl" or path.stem not in moved
             if pattern.search(path.read_text("utf-8"))]
    assert found == []


RETIRED_IDENTIFIER = re.compile(r"dispatch", re.IGNORECASE)
"""Any identifier spelling the lease concept's old name: Dispatch, Dispatcher, dispatch,
dispatches, dispatch_, DISPATCH_KEY, ..."""


@pytest.mark.parametrize(("module", "old", "new"), RETIRED)
def test_an_old_name_imports_with_a_warning_naming_the_new_one(module, old, new):
    if module.startswith("frontier_rate.frontera"):
        pytest.importorskip("frontera")
    loaded = importlib.import_module(module)
    renamed.WARNED.discard((module, old))
    with pytest.warns(DeprecationWarning, match=rf"{re.escape(module)}\.{old} is renamed .*\.{new}"):
        value = getattr(loaded, old)
    assert value is getattr(loaded, new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: a second use does not warn again
        assert getattr(loaded, old) is value


def test_an_unknown_name_is_still_an_attribute_error():
    import frontier_rate.engine.records as records

    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        records.Nothing  # noqa: B018


def retired_identifiers(source: str) -> list[tuple[int, str]]:
    """(line, identifier) of every Python name in ``source`` that spells a retired name;
    strings and comments are not names (a stored key such as ``"frontier_rate_dispatch"``
    keeps its spelling so that stored data stays readable)."""
    return [(tok.start[0], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.NAME and RETIRED_IDENTIFIER.search(tok.string)]


def test_the_package_uses_no_retired_name():
    found = {f"{path.relative_to(PACKAGE)}:{line}": name
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, name in retired_identifiers(path.read_text("utf-8"))}
    assert found == {}


def test_the_scan_finds_a_planted_retired_name():
    planted = "from frontier_rate.engine.records import Lease\n\nfor dispatch in leases:\n    pass\n"
    assert retired_identifiers(planted) == [(3, "dispatch")]
    assert retired_identifiers('KEY = "frontier_rate_dispatch"  # dispatch\n') == []
