"""The ``frontier-rate`` command: inspect and manage a frontier's Redis state.

Every subcommand takes ``--redis URL`` (default ``$FRONTIER_RATE_REDIS_URL``,
else the embedded Redis), ``--namespace NS`` (default
``$FRONTIER_RATE_NAMESPACE``, else the only namespace the server holds) and ``--json``. Human output
is aligned tables; errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import click
from tabulate import tabulate

from frontier_rate import testbed as bed
from frontier_rate.crawl import signal_sources as signals
from frontier_rate.crawl.idle_reason import lease_end
from frontier_rate.crawl.signal_sources import claims_of
from frontier_rate.detection import detection_record
from frontier_rate.engine.frontier import Frontier, parse_url
from frontier_rate.math import index as policy  # the cell bins, defined in math/index.py
from frontier_rate.scrapy.requests import written_page_url
from frontier_rate.store.connection import FrontierError, connect, redact_url
from frontier_rate.store.errors import translate
from frontier_rate.store.keys import NAMESPACE_RE
from frontier_rate.store.namespace import SETTINGS
from frontier_rate.store.namespace import drop as drop_namespace
from frontier_rate.store.namespace_list import list_namespaces
from frontier_rate.testbed import demo as demo_module

EXIT_USAGE = 2


class Failure(click.ClickException):
    """A one-line error with exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"frontier-rate: {self.message}", err=True)


def common(command: Callable) -> Callable:
    """The options every subcommand takes."""
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(command)
    command = click.option("--namespace", "-n", envvar="FRONTIER_RATE_NAMESPACE", default=None,
                           help="Frontier namespace (Scrapy: <project>.<spider>); default: the "
                                "only one the server holds.")(command)
    command = click.option("--redis", "redis_url", envvar="FRONTIER_RATE_REDIS_URL", default=None,
                           help="Redis URL (redis://, rediss://, unix://, redis+cluster://); "
                                "default: the embedded Redis.")(command)
    return command


def only_namespace(redis_url: str | None) -> str:
    """The namespace to use when none is given: the only one the server holds; with none or
    several, a failure that lists them and asks for ``-n`` (a crawl's namespace is
    ``<BOT_NAME>.<spider>``, so no fixed default would find it)."""
    names = [row["namespace"] for row in namespace_rows(redis_url)]
    where = redact_url(redis_url)
    if len(names) == 1:
        click.echo(f"frontier-rate: namespace {names[0]!r} (the only one at {where})", err=True)
        return names[0]
    if not names:
        raise Failure(f"no frontiers at {where}; name one with -n NAME")
    shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    raise Failure(f"{len(names)} frontiers at {where}: {shown}; choose one with -n NAME")


def namespace_rows(redis_url: str | None) -> list[dict]:
    """The namespaces of the server (``list_namespaces``), or a one-line failure."""
    from redis import RedisError

    try:
        client = connect(redis_url, existing=True)
        try:
            return list_namespaces(client)
        finally:
            client.close()
    except (FrontierError, ValueError, RedisError) as exc:
        raise Failure(str(exc)) from None


def open_frontier(redis_url: str | None, namespace: str | None, *, create: bool = False):
    """The frontier of an existing namespace (or a new one with ``create``), or a one-line
    failure; ``namespace`` None: the only one there is (``only_namespace``)."""
    if namespace is None:
        namespace = only_namespace(redis_url)
    try:
        if create:
            return Frontier(redis_url, namespace=namespace)
        return Frontier.attach(redis_url, namespace)
    except (FrontierError, ValueError) as exc:  # UnknownNamespace, NoEmbeddedData too
        raise Failure(str(exc)) from None


def when(t: float | None, now: float) -> str:
    """A time as 'in 5m' / '3h ago' for tables."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "-"
    delta = t - now
    span = abs(delta)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if span >= size:
            text = f"{span / size:.1f}{unit}"
            break
    else:
        text = f"{span:.0f}s"
    return f"in {text}" if delta > 0 else f"{text} ago"


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        click.echo(render(data))


def key_value(record: dict) -> str:
    return tabulate([(k, "-" if v is None else v) for k, v in record.items()], tablefmt="plain")


class Commands(click.Group):
    """The subcommands; any FrontierError they meet (Redis unreachable or refusing writes,
    a namespace lost, other settings) is one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FrontierError as exc:
            raise Failure(str(exc)) from None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="frontier-rate")
def main() -> None:
    """Inspect and manage frontier-rate's revisit frontier in Redis."""
    # the engine's log lines (a server without persistence, ...) are what ``stats`` shows;
    # here errors are one line on stderr, so nothing else may print there
    logging.getLogger("frontier_rate").addHandler(logging.NullHandler())


@main.command()
@click.argument("url")
@common
def inspect(url: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """One page: weight, change-rate estimate, fetches, changes, next due time."""
    frontier = open_frontier(redis_url, namespace)
    try:  # the URL as the Scrapy scheduler stores it (host case, fragment), else as written
        stored = written_page_url(url)
        record = frontier.page(stored)
        if record is None and stored != url:
            record = frontier.page(url)
    except ValueError as exc:
        raise Failure(str(exc)) from None
    if record is None:
        raise Failure(f"unknown page {url!r} in namespace {frontier.namespace!r}")
    now = time.time()
    record = dict(record)
    detection = last_detection(frontier, record["url"])
    if detection is not None:
        record["last_detection"] = detection if as_json else describe_detection(detection, now)
    if record["status"] == "leased" and record.get("lease_ends") is not None \
            and record["lease_ends"] <= now:  # the crawl holding it stopped: due again
        record["status"] = "due (lease expired)"
    if not as_json:
        for field in ("last_fetch", "next_due", "lease_ends"):
            if record.get(field) is not None:
                record[field] = f"{record[field]:.3f} ({when(record[field], now)})"
    emit(record, as_json, key_value)


def last_detection(frontier: Frontier, url: str) -> dict | None:
    """The page's last content detection as stored with the pages' detection memories in
    Redis (detection/detection_record.py), or None."""
    return detection_record.decode(frontier.inspector.last_detection(url))


def describe_detection(found: dict, now: float) -> str:
    """One line for ``inspect``'s table: what the page's last detection decided and why."""
    if found.get("not_content"):
        said = f"not content ({found['not_content']})"
    else:
        said = (f"{found.get('segments')} content segments, "
                f"{found.get('changed_segments')} changed, "
                f"{found.get('ignored_segments')} differences ignored")
    parts = [said, f"host masks hid {found.get('host_masked_segments', 0)} segments "
                   f"({found.get('host_mask_size', 0)} learned), volatile slots "
                   f"{found.get('host_slot_segments', 0)}"]
    if found.get("content_selector"):
        parts.append(f"selector {found['content_selector']!r}")
    if found.get("ignore_text_patterns"):
        parts.append(f"{found['ignore_text_patterns']} ignore-text patterns")
    at = found.get("at")
    if isinstance(at, (int, float)):
        parts.append(when(at, now))
    return "; ".join(parts)


@main.command()
@click.option("--limit", "-l", type=click.IntRange(1, 100_000), default=20, show_default=True)
@common
def due(limit: int, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """The pages that fall due soonest."""
    frontier = open_frontier(redis_url, namespace)
    now = time.time()
    pages = frontier.due(limit)
    columns = ("url", "next_due", "estimate", "weight", "fetches", "changes", "status")

    def render(rows: list[dict]) -> str:
        table = [[p["url"], when(p["next_due"], now), f"{p['estimate']:.3g}/s", p["weight"],
                  p["fetches"], p["changes"], p["status"]] for p in rows]
        return tabulate(table, headers=columns) if table else "no pages queued"

    emit(pages, as_json, render)


@main.command()
@common
def stats(redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Counters: pages, due now, leased, gone, quarantined, threshold ν, budget use, changes seen;
    the shared settings; what the Redis server promises (eviction policy, persistence, role)
    and whether the namespace is whole, with a warning per way Redis can lose its data."""
    if click.get_current_context().get_parameter_source("namespace") is \
            click.core.ParameterSource.DEFAULT:
        show_namespaces(redis_url, as_json)  # no -n: which namespaces are there?
        return
    frontier = open_frontier(redis_url, namespace)
    record = {**frontier.stats(), **frontier.health()}
    if record["leased"]:  # when the last lease ends: pages held by a stopped crawl come back then
        end = lease_end(frontier)
        record["leases_end"] = end if as_json or end is None else \
            f"{end:.3f} ({when(end, time.time())})"
    if as_json:
        emit(record, True, key_value)
        return
    warnings = record.pop("warnings")
    click.echo(key_value(record))
    for text in warnings:
        click.echo(f"warning: {text}")


def show_namespaces(redis_url: str | None, as_json: bool) -> None:
    """List the namespaces of the server (``stats`` without ``-n``)."""
    rows = namespace_rows(redis_url)
    if as_json:
        emit(rows, True, key_value)
        return
    if not rows:
        click.echo(f"no frontiers at {redact_url(redis_url)}")
        return
    click.echo(f"frontiers at {redact_url(redis_url)} (frontier-rate stats -n NAME for one):")
    for row in rows:
        origin = f"  (project {row['project']}, spider {row['spider']})" if row["project"] else ""
        click.echo(f"  {row['namespace']}{origin}")


@main.command()
@click.option("--budget", type=float, help="Fetches per second over all hosts.")
@click.option("--min-host-delay", type=float, help="Seconds between two fetches of one host.")
@click.option("--lease-timeout", type=float, help="Seconds before an unanswered page is handed out again.")
@click.option("--min-interval", type=float, help="Shortest planned revisit interval (s).")
@click.option("--max-interval", type=float, help="Longest planned revisit interval (s).")
@click.option("--prior-rate", type=float, help="Change rate (1/s) assumed for a page never fetched.")
@common
def settings(redis_url: str | None, namespace: str | None, as_json: bool,
             **values: float | None) -> None:
    """Show the settings every process of the namespace shares, or change them for all of them."""
    frontier = open_frontier(redis_url, namespace)
    changes = {name: value for name, value in values.items() if value is not None}
    if changes:
        try:
            frontier.set_settings(**changes)
        except ValueError as exc:
            raise Failure(str(exc)) from None
    emit({name: getattr(frontier, name) for name in SETTINGS}, as_json, key_value)


@main.command()
@click.option("--yes", is_flag=True, help="Really delete every key of the namespace.")
@common
def drop(yes: bool, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Delete a namespace's keys, e.g. one that lost keys and cannot be opened (SCAN, never KEYS)."""
    if namespace is None:  # never guessed: the only namespace is no reason to delete it
        raise Failure("drop needs the namespace named: -n NAME")
    if not NAMESPACE_RE.match(namespace):
        raise Failure(f"namespace must be 1-64 characters of A-Z a-z 0-9 _ . -, got {namespace!r}")
    if not yes:
        raise Failure(f"this deletes every key of namespace {namespace!r} at {redact_url(redis_url)}; "
                      "add --yes to do it")
    import redis

    client = connect(redis_url, existing=True)
    try:
        deleted = drop_namespace(client, namespace)
    except redis.RedisError as exc:
        raise Failure(str(translate(exc, redis_url, f"dropping namespace {namespace!r}"))) from None
    finally:
        client.close()
    emit({"namespace": namespace, "keys_deleted": deleted}, as_json, key_value)


@main.command()
@common
def quarantine(redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Pages quarantined for corrupt state in Redis: URL and reason ('add' the URL again to reset it)."""
    frontier = open_frontier(redis_url, namespace)
    pages = list(frontier.quarantined())

    def render(rows: list[dict]) -> str:
        if not rows:
            return "no quarantined pages"
        table = [[p["url"] or f"(URL missing; id {p['id']})", p["host"], p["reason"]] for p in rows]
        return tabulate(table, headers=("url", "host", "reason"))

    emit(pages, as_json, render)


@main.command()
@common
def clusters(redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """The policy cells (pages grouped by weight and rate) the threshold is solved over."""
    frontier = open_frontier(redis_url, namespace)
    rows = []
    for cell, (n, rate_sum, weight_sum) in sorted(frontier.cells().items()):
        weight_bin, rate_bin = divmod(cell, policy.N_RATE_BINS)
        rows.append({"cell": cell, "weight_bin": weight_bin, "rate_bin": rate_bin, "pages": int(n),
                     "mean_weight": weight_sum / n, "mean_rate": rate_sum / n, "rate_sum": rate_sum})

    def render(data: list[dict]) -> str:
        if not data:
            return "no pages"
        headers = ["cell", "weight bin", "rate bin", "pages", "mean weight", "mean rate /s", "Σ rate /s"]
        table = [[r["cell"], r["weight_bin"], r["rate_bin"], r["pages"], r["mean_weight"], r["mean_rate"],
                  r["rate_sum"]] for r in data]
        return tabulate(table, headers=headers, floatfmt=".4g")

    emit(rows, as_json, render)


@main.command()
@common
def solve(redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Re-solve the threshold ν from the cell aggregates now, and show it."""
    frontier = open_frontier(redis_url, namespace)
    started = time.perf_counter()
    nu = frontier.resolve()
    elapsed = time.perf_counter() - started
    s = frontier.stats()
    result = {"nu": nu, "budget": s["budget"], "planned_rate": s["planned_rate"],
              "budget_use": s["budget_use"], "cells": len(frontier.cells()), "solve_ms": elapsed * 1e3}
    emit(result, as_json, key_value)


@main.command(name="export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
@common
def export_pages(fmt: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Every page's record to stdout (SCAN, never KEYS)."""
    frontier = open_frontier(redis_url, namespace)
    pages = frontier.iter_pages()
    if fmt == "jsonl" or as_json:
        for record in pages:
            click.echo(json.dumps(record, sort_keys=True, default=str))
        return
    writer = None
    for record in pages:
        row = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in record.items()}
        if writer is None:
            writer = csv.DictWriter(sys.stdout, fieldnames=list(row))
            writer.writeheader()
        writer.writerow(row)


def parse_import(lines: Iterable[str]) -> tuple[list[tuple[str, float]], list[str]]:
    """Pages from 'URL [weight]' lines (blank lines and # comments skipped), and one message per bad line."""
    pages, errors = [], []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        if len(fields) > 2:
            errors.append(f"line {number}: expected 'URL [weight]', got {text!r}")
            continue
        try:
            parse_url(fields[0])
            weight = float(fields[1]) if len(fields) == 2 else 1.0
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"weight must be a finite number >= 0, got {fields[1]!r}")
        except ValueError as exc:
            errors.append(f"line {number}: {exc}")
            continue
        pages.append((fields[0], weight))
    return pages, errors


@main.command(name="import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--skip-invalid", is_flag=True, help="Import the valid lines even if some are invalid.")
@common
def import_pages(file: Any, skip_invalid: bool, redis_url: str | None, namespace: str | None,
                 as_json: bool) -> None:
    """Add pages from FILE ('-' for stdin): one URL per line, optionally followed by a weight."""
    pages, errors = parse_import(file)
    for message in errors:
        click.echo(f"frontier-rate: {message}", err=True)
    if errors and not skip_invalid:
        raise Failure(f"{len(errors)} invalid line(s), nothing imported (--skip-invalid imports the rest)")
    frontier = open_frontier(redis_url, namespace, create=True)
    added = frontier.add_many(pages)
    result = {"read": len(pages) + len(errors), "added": added, "updated": len(pages) - added,
              "invalid": len(errors)}
    emit(result, as_json, key_value)


def read_push(body: bytes, fmt: str | None, name: str, now: float):
    """The entries of a push body (``signals.parse_push``) and one message per entry dropped;
    a body that cannot be read at all (or has nothing in it) is a ``Failure``."""
    try:
        parsed = signals.parse_push(body, name, now=now, form=fmt)
    except signals.SignalError as exc:
        raise Failure(f"{exc} (--format {fmt or 'guessed from the content'})") from None
    if not parsed.entries and not parsed.dropped:
        raise Failure(f"{name}: no URLs in the {parsed.kind} input; nothing hinted")
    messages = list(parsed.warnings)
    if parsed.dropped > len(messages):
        messages.append(f"... and {parsed.dropped - len(messages)} more")
    return parsed, messages


@main.command()
@click.argument("file", type=click.File("rb"), default="-")
@click.option("--format", "fmt", type=click.Choice(["indexnow", "websub", "lines"]), default=None,
              help="What FILE holds: an IndexNow JSON body, a WebSub (RSS/Atom) feed, or "
                   "'URL [date]' lines. Default: guessed from the content.")
@click.option("--discover", is_flag=True, help="Add the URLs the frontier does not know.")
@click.option("--skip-invalid", is_flag=True, help="Hint the valid entries even if some are invalid.")
@common
def hint(file: Any, fmt: str | None, discover: bool, skip_invalid: bool, redis_url: str | None,
         namespace: str | None, as_json: bool) -> None:
    """Hand a push to the frontier: pages of FILE ('-' or left out: stdin) changed (source "push").

    Claims move schedules only once pushes have proved right for the host (docs/SIGNALS.md).
    Prints how many claims had each outcome.
    """
    name = "<stdin>" if file.name in ("-", "<stdin>") else str(file.name)
    parsed, errors = read_push(file.read(), fmt, name, time.time())
    for message in errors:
        click.echo(f"frontier-rate: {message}", err=True)
    if errors and not skip_invalid:
        raise Failure(f"{parsed.dropped} invalid entr{'y' if parsed.dropped == 1 else 'ies'}, "
                      "nothing hinted (--skip-invalid hints the rest)")
    frontier = open_frontier(redis_url, namespace)
    try:
        counts = frontier.signal_many(claims_of(parsed.entries, "push"), discover=discover)
    except ValueError as exc:
        raise Failure(f"{exc}; nothing hinted") from None
    result = {"format": {"lines": "lines", "indexnow": "indexnow"}.get(parsed.kind, "websub"),
              "read": len(parsed.entries) + parsed.dropped, "invalid": parsed.dropped, **counts}
    emit(result, as_json, key_value)


@main.command(add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def testbed(ctx: click.Context) -> None:
    """Run the living-web test-bed (options: see 'frontier-rate testbed --help')."""
    sys.exit(bed.main(ctx.args))


@main.command(add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Crawl the test-bed with Scrapy and report freshness against the optimum."""
    sys.exit(demo_module.main(ctx.args))


if __name__ == "__main__":
    main()
