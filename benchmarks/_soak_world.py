"""One soak world: a redis-server with AOF, the faulty test-bed, four crawler processes
of ``example_project`` on one frontier, a sampler, and a schedule of faults.

``World.run()`` crawls for ``duration`` real seconds, firing each fault at its time,
sampling every ``sample_every`` seconds, and returns everything the checks need.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from frontier_rate.engine.frontier import Frontier
from frontier_rate.testbed.demo import DemoConfig, crawl_command, example_project_dir

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _soak_capture import read_capture, start_capture  # noqa: E402
from redis_servers import RedisServer  # noqa: E402
from scrapy_support.harness import spawned_children  # noqa: E402

LEASE_TIMEOUT = 120.0
REDIS_MEMORY_PARTS = ("used_memory_dataset", "used_memory_overhead", "used_memory_scripts",
                      "used_memory_lua", "mem_clients_normal", "mem_aof_buffer",
                      "used_memory_startup")
"""INFO memory fields sampled beside used_memory: where its growth is (keys, scripts, clients)."""
"""Seconds before an unanswered fetch is handed out again (a kill -9 restarted a minute
later finds its leases still held)."""

LOST_LINE = "frontier-rate drop -n"
"""In the ERROR a crawler logs when its namespace is gone (``NamespaceLost``)."""


@dataclass
class Fault:
    """One fault: at ``at`` (fraction of the run), ``kind``, its arguments."""

    at: float
    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def site_only(self) -> bool:
        """A fault of the web (a host), which the fault-free control run sees too."""
        return self.kind == "host"


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) ``pid`` has used, in seconds; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (Linux /proc), None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


class SiteProcess:
    """The faulty test-bed served by its own process (``_soak_site.serve``)."""

    def __init__(self, out: Path, cfg: DemoConfig, base_address: str) -> None:
        self.log_path, self.truth_path = out / "requests.jsonl", out / "truth.json"
        self.command = [sys.executable, str(Path(__file__).resolve().parent / "_soak_site.py"),
                        "--base", base_address, "--log", str(self.log_path),
                        "--truth", str(self.truth_path), "--pages", str(cfg.pages),
                        "--hosts", str(cfg.hosts), "--seed", str(cfg.seed),
                        "--acceleration", str(cfg.acceleration),
                        "--rate-min", str(cfg.rate_min), "--rate-max", str(cfg.rate_max),
                        "--crawl-delay", str(cfg.crawl_delay)]
        self.proc: subprocess.Popen | None = None
        self.info: dict[str, Any] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.info = json.loads(self.proc.stdout.readline())

    def set_fault(self, host: int, mode: str | None) -> None:
        with self._lock:
            self.proc.stdin.write(f"fault {host} {mode or 'none'}\n")
            self.proc.stdin.flush()
            if self.proc.stdout.readline().strip() != "ok":
                raise RuntimeError(f"the site refused fault {host} {mode}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with self._lock:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            self.proc.wait(timeout=60)

    @property
    def started_at_wall(self) -> float:
        return self.info["started_at_wall"]

    @property
    def addresses(self) -> list[str]:
        return self.info["addresses"]

    @property
    def port(self) -> int:
        return self.info["port"]

    def seed_urls(self) -> list[str]:
        return [base + "/" for base in self.info["hosts"]]

    def read_log(self, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """Entries of the request log from byte ``offset`` on, and the offset after them."""
        if not self.log_path.exists():
            return [], offset
        with self.log_path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
        complete = data[:data.rfind(b"\n") + 1]
        entries = [json.loads(line) for line in complete.splitlines() if line.strip()]
        return entries, offset + len(complete)

    def lag(self) -> list[dict[str, Any]]:
        """Times the site's process woke late (``_soak_site.LAG_REPORTED``)."""
        path = Path(str(self.log_path) + ".lag")
        return [json.loads(line) for line in path.read_text().splitlines()] \
            if path.exists() else []

    def truth(self) -> dict[str, Any]:
        return json.loads(self.truth_path.read_text())


class Crawler:
    """One crawler slot: a ``scrapy crawl pages`` process, restarted as a new run."""

    def __init__(self, world: World, index: int) -> None:
        self.world, self.index, self.run = world, index, 0
        self.proc: subprocess.Popen | None = None
        self.log: Path | None = None

    @property
    def agent(self) -> str:
        return f"soak-{self.world.name}-c{self.index}-r{self.run}"

    def start(self) -> None:
        self.run += 1
        world = self.world
        self.log = world.out / f"{self.agent}.log"
        extra = {"USER_AGENT": self.agent, "FRONTIER_RATE_FINGERPRINT": "content",
                 "FRONTIER_RATE_SPOOL_DIR": str(world.out / f"spool-c{self.index}"),
                 "FRONTIER_RATE_LEASE_TIMEOUT": LEASE_TIMEOUT,
                 "FRONTIER_RATE_LOG_INTERVAL": 60, "CONCURRENT_REQUESTS": 16}
        command = crawl_command(world.cfg, world.site.seed_urls(), world.namespace,
                                self.log, extra)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(example_project_dir()), str(ROOT), os.environ.get("PYTHONPATH", "")]))
        err = (world.out / f"{self.agent}.err").open("w")
        self.proc = subprocess.Popen(command, cwd=example_project_dir(), env=env,
                                     stdout=subprocess.DEVNULL, stderr=err)
        err.close()
        world.processes[self.proc.pid] = {"label": self.agent, "kind": "crawler",
                                          "start": world.now()}
        world.event("start", self.agent)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        assert self.proc is not None
        self.world.event("kill -9", self.agent)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.world.processes[self.proc.pid]["end"] = self.world.now()

    def stop(self, timeout: float = 90.0) -> int:
        """A graceful stop (SIGINT, as Ctrl-C): in-flight fetches end, leases go back."""
        assert self.proc is not None
        self.world.event("graceful stop", self.agent)
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.world.event("stop timed out: kill -9", self.agent)
            self.proc.kill()
            code = self.proc.wait()
        self.world.processes[self.proc.pid]["end"] = self.world.now()
        return code

    def children(self) -> list[int]:
        return spawned_children(self.proc.pid) if self.alive() else []


class World:
    """Redis, the site and four crawlers; ``faults`` fire at their fraction of ``duration``."""

    def __init__(self, name: str, out: Path, cfg: DemoConfig, base_address: str,
                 faults: list[Fault], duration: float, sample_every: float,
                 crawlers: int = 4) -> None:
        self.name, self.out, self.cfg = name, out, cfg
        self.faults, self.duration, self.sample_every = faults, duration, sample_every
        out.mkdir(parents=True, exist_ok=True)
        self.namespace = f"soak-{name}"
        self._make_store()
        self.site = SiteProcess(out, cfg, base_address)
        self.crawlers = [Crawler(self, i) for i in range(crawlers)]
        self.events: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.processes: dict[int, dict[str, Any]] = {}
        self.epoch = 0.0
        """Real time (site clock) from which the frontier holds every fetch (after a
        recovery from an emptied Redis, the new namespace's start)."""
        self.recovery: dict[str, Any] = {}
        self._t0 = 0.0
        self._stop = threading.Event()
        self._frontier: Frontier | None = None
        self.capture: subprocess.Popen | None = None
        self._log_seen = 0

    # ----- time and events --------------------------------------------------

    def now(self) -> float:
        """Real seconds since the site started (its request log's ``real_time``, give or
        take the drift of the wall clock against the monotonic one)."""
        return time.time() - self._t0

    def event(self, kind: str, detail: str = "") -> None:
        entry = {"t": round(self.now(), 3), "kind": kind, "detail": detail}
        self.events.append(entry)
        print(f"[{self.name} {entry['t']:7.1f}s] {kind} {detail}", flush=True)

    def _sleep_until(self, t: float) -> None:
        while self.now() < t:
            time.sleep(min(1.0, t - self.now()))

    # ----- the store: one redis-server here, a cluster in ``ClusterWorld`` ---------

    def _make_store(self) -> None:
        """The redis-server (AOF, ``appendfsync everysec``), not started yet."""
        self.redis = RedisServer(self.out / "redis", args=["--appendonly", "yes",
                                                           "--appendfsync", "everysec"])

    @property
    def redis_url(self) -> str:
        """The URL the crawlers and ``Frontier.attach`` use."""
        return self.redis.url

    def _start_store(self) -> None:
        self.redis.start()
        self.processes[self.redis.proc.pid] = {"label": "redis-1", "kind": "redis", "start": 0.0}

    def _stop_store(self) -> None:
        self.redis.stop()

    def _store_rss(self) -> dict[str, int | None]:
        """RSS of every redis-server process running, by its label."""
        return {self.processes[self.redis.proc.pid]["label"]: rss_bytes(self.redis.proc.pid)}

    def _before_collect(self) -> None:
        """Wait for the store to answer before the end's reading (a cluster: state ok)."""

    # ----- the run ------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self._start_store()
        self.cfg.redis_url = self.redis_url
        self.site.start()
        net = ".".join(self.site.addresses[0].split(".")[:3]) + ".0/24"
        self.capture = start_capture(self.out / "requests.pcap", net, self.site.port)
        self._t0 = self.site.started_at_wall
        sampler = threading.Thread(target=self._sample_loop, name=f"sampler-{self.name}",
                                   daemon=True)
        try:
            for crawler in self.crawlers:
                crawler.start()
            sampler.start()
            timers: list[tuple[float, Any]] = []
            for fault in sorted(self.faults, key=lambda f: f.at):
                timers.append((fault.at * self.duration, fault))
            for at, fault in timers:
                self._sleep_until(at)
                self._fire(fault)
            self._sleep_until(self.duration)
            self.event("end", "graceful stop of every crawler")
            codes = [c.stop() for c in self.crawlers if c.alive()]
            self._stop.set()
            sampler.join(timeout=60)
            self._sample()  # after the close: leases handed back, spools empty
            return self._collect(codes)
        finally:
            self._stop.set()
            for crawler in self.crawlers:
                if crawler.alive():
                    crawler.proc.kill()
            self.site.stop()
            if self.capture is not None:
                self.capture.terminate()
                self.capture.wait(timeout=10)
            if self._frontier is not None:
                self._frontier.close()
            self._stop_store()

    def _fire(self, fault: Fault) -> None:
        args = fault.args
        if fault.kind == "kill9":
            crawler = self.crawlers[args["crawler"]]
            crawler.kill9()
            threading.Timer(args["restart_after"], self._restart, (crawler,)).start()
        elif fault.kind == "graceful":
            crawler = self.crawlers[args["crawler"]]
            code = crawler.stop()
            self.event("stopped", f"{crawler.agent} exit code {code}")
            threading.Timer(args["restart_after"], self._restart, (crawler,)).start()
        elif fault.kind == "detection":
            crawler = self.crawlers[args["crawler"]]
            children = crawler.children()
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            self.event("detection child killed", f"{crawler.agent}: pids {children}")
        elif fault.kind == "host":
            host, mode = args["host"], args["mode"]
            self.event(f"host {mode}", self.site.addresses[host])
            self.site.set_fault(host, mode)
            threading.Timer(args["for"] * self.duration, self._host_back, (host, mode)).start()
        else:
            self._store_fault(fault)

    def _store_fault(self, fault: Fault) -> None:
        """A fault of Redis: ``redis_restart``, ``pause``, ``empty``."""
        if fault.kind == "redis_restart":
            self.event("redis restart", "SHUTDOWN (AOF flushed), down 3 s, start")
            self._restart_redis(empty=False, down=3.0)
        elif fault.kind == "pause":
            self.event("client pause", f"{fault.args['seconds']} s")
            client = self.redis.client()
            client.execute_command("CLIENT", "PAUSE", int(fault.args["seconds"] * 1000))
            client.close()
        elif fault.kind == "empty":
            self._empty_and_recover()
        else:
            raise ValueError(f"fault kind {fault.kind!r} unknown")

    def _restart(self, crawler: Crawler) -> None:
        if not self._stop.is_set() and not crawler.alive():
            crawler.start()

    def _host_back(self, host: int, mode: str) -> None:
        self.site.set_fault(host, None)
        self.event(f"host {mode} over", self.site.addresses[host])

    def _restart_redis(self, empty: bool, down: float) -> None:
        pid = self.redis.proc.pid
        if empty:
            self.redis.kill()
            for item in self.redis.directory.iterdir():
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        else:
            self.redis.shutdown()
        self.processes[pid]["end"] = self.now()
        time.sleep(down)
        self.redis.start()
        runs = sum(1 for p in self.processes.values() if p["kind"] == "redis") + 1
        self.processes[self.redis.proc.pid] = {"label": f"redis-{runs}", "kind": "redis",
                                               "start": self.now()}

    def _empty_and_recover(self) -> None:
        """Redis killed and its files deleted; the crawlers must notice and refuse; then
        the steps of docs/RELIABILITY.md: stop the crawlers, drop, start afresh."""
        self.event("redis emptied", "kill -9, AOF deleted, restarted empty")
        self._restart_redis(empty=True, down=1.0)
        emptied = self.now()
        running = [c for c in self.crawlers if c.alive()]
        noticed: dict[str, float | None] = {c.agent: None for c in running}
        while self.now() < emptied + 60 and None in noticed.values():
            for crawler in running:
                if noticed[crawler.agent] is None and crawler.log and crawler.log.exists() \
                        and LOST_LINE in crawler.log.read_text(errors="replace"):
                    noticed[crawler.agent] = round(self.now() - emptied, 1)
            time.sleep(1.0)
        client = self.redis.client()
        keys = sorted(k.decode() for k in client.scan_iter(f"fr:{{{self.namespace}*"))
        client.close()
        self.event("emptied redis noticed", json.dumps(noticed))
        codes = {c.agent: c.stop() for c in running}
        drop = subprocess.run([sys.executable, "-m", "frontier_rate", "drop", "-n",
                               self.namespace, "--yes", "--redis", self.redis_url],
                              capture_output=True, text=True, timeout=60)
        self.event("frontier-rate drop", f"exit {drop.returncode}: {drop.stdout.strip()[-200:]}")
        self.epoch = self.now()
        for crawler in self.crawlers:
            if not crawler.alive():
                crawler.start()
        self.recovery = {"noticed_after_s": noticed, "keys_written_while_lost": keys,
                         "stop_codes": codes, "drop_exit": drop.returncode,
                         "drop_output": (drop.stdout + drop.stderr).strip()[-500:],
                         "epoch": self.epoch}

    # ----- sampling -------------------------------------------------------------

    def _sample_loop(self) -> None:
        while not self._stop.wait(self.sample_every):
            try:
                self._sample()
            except Exception as exc:  # noqa: BLE001 - a sample must never end the soak
                self.samples.append({"t": round(self.now(), 2), "error": repr(exc)[:300]})

    def _sample(self) -> None:
        t = self.now()
        sample: dict[str, Any] = {"t": round(t, 2), "rss": {}}
        for crawler in self.crawlers:
            if not crawler.alive():
                continue
            sample["rss"][crawler.agent] = rss_bytes(crawler.proc.pid)
            for pid in crawler.children():
                label = f"{crawler.agent}-detect-{pid}"
                self.processes.setdefault(pid, {"label": label, "kind": "detection",
                                                "start": t})
                sample["rss"][label] = rss_bytes(pid)
        sample["rss"].update(self._store_rss())
        sample["cpu_s"] = {self.processes[pid]["label"]: cpu_seconds(pid)
                           for pid in self._live_pids()}
        new, self._log_seen = self.site.read_log(self._log_seen)
        per_host: dict[str, int] = {}
        for entry in new:
            per_host[entry["host"]] = per_host.get(entry["host"], 0) + 1
        span = max(self.sample_every, 1e-6)
        sample["requests_per_s"] = round(len(new) / span, 3)
        sample["max_host_requests_per_s"] = round(max(per_host.values(), default=0) / span, 3)
        sample["spool_files"] = sum(1 for d in self.out.glob("spool-c*") if d.is_dir()
                                    for f in d.rglob("*") if f.is_file())
        try:
            sample.update(self._redis_sample())
            sample.update(self._frontier_sample())
        except Exception as exc:  # noqa: BLE001 - Redis down, paused or emptied: say so
            sample["redis_error"] = repr(exc)[:200]
            if self._frontier is not None:
                self._frontier.close()
                self._frontier = None
        self.samples.append(sample)

    def _live_pids(self) -> list[int]:
        """Processes of the world (crawlers, detection children, Redis) still running."""
        return [pid for pid, p in self.processes.items()
                if "end" not in p and Path(f"/proc/{pid}").exists()]

    def _redis_sample(self) -> dict[str, Any]:
        """Redis's memory, keys and leases (the ages of their deadlines)."""
        client = redis.Redis(host="127.0.0.1", port=self.redis.port, socket_timeout=3)
        try:
            info = client.info("memory")
            seconds, micros = client.time()
            now_us = seconds * 1e6 + micros
            ages = []
            for key in client.scan_iter(f"fr:{{{self.namespace}:*}}:leases"):
                for _member, deadline in client.zrange(key, 0, -1, withscores=True):
                    ages.append((now_us - deadline) / 1e6 + LEASE_TIMEOUT)
            found = {"redis_used_memory": info["used_memory"], "redis_keys": client.dbsize(),
                     "leases": len(ages), "lease_max_age": round(max(ages, default=0.0), 2),
                     "redis_memory": {name: info.get(name) for name in REDIS_MEMORY_PARTS},
                     "redis_key_bytes": key_census(client)}
        finally:
            client.close()
        return found

    def _frontier_sample(self) -> dict[str, Any]:
        """Pages, due times and fetches as the frontier reads them."""
        if self._frontier is None:
            self._frontier = Frontier.attach(self.redis_url, namespace=self.namespace)
        pages = list(self._frontier.iter_pages())
        now = time.time()
        dues = [p["next_due"] for p in pages if p["next_due"] is not None]
        return {"pages": len(pages), "pages_due_set": len(dues),
                "pages_leased": sum(p["status"] == "leased" for p in pages),
                "pages_overdue_60s": sum(d < now - 60 for d in dues),
                "fetches": sum(p["fetches"] or 0 for p in pages)}

    # ----- the record -------------------------------------------------------------

    def _collect(self, codes: list[int]) -> dict[str, Any]:
        self.site.stop()
        truth = self.site.truth()
        if self.capture is not None:
            time.sleep(1.0)  # tcpdump writes each packet at once (-U); let it catch up
            self.capture.terminate()
            self.capture.wait(timeout=10)
            self.capture = None
        capture = read_capture(self.out / "requests.pcap")
        self._before_collect()
        frontier = Frontier.attach(self.redis_url, namespace=self.namespace)
        try:
            urls = [p["url"] for p in truth["pages"]] + self.site.seed_urls()
            pages = {url: frontier.page(url) for url in urls}
            every = list(frontier.iter_pages())
        finally:
            frontier.close()
        return {"name": self.name, "duration": self.duration, "events": self.events,
                "samples": self.samples, "processes": self.processes, "epoch": self.epoch,
                "recovery": self.recovery, "final_exit_codes": codes, "pages": pages,
                "frontier_pages": every, "truth": truth,
                "requests": self.site.read_log()[0], "site_lag": self.site.lag(),
                "capture": capture, "delays": self.cfg.host_delays(),
                "min_host_delay": self.cfg.min_host_delay,
                "addresses": self.site.addresses, "port": self.site.port, "faults": [f.__dict__ for f in self.faults]}


def key_census(client: redis.Redis) -> dict[str, list[int]]:
    """Per key shape (hosts and numbers written as H and N): [keys, MEMORY USAGE bytes]."""
    shapes: dict[str, list[int]] = {}
    keys = list(client.scan_iter(count=1000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key)
    for key, used in zip(keys, pipe.execute(), strict=True):
        shape = re.sub(rb"\d+(\.\d+){3}(:\d+)?", b"H", key)
        shape = re.sub(rb"\d+", b"N", shape).decode("utf-8", "replace")
        entry = shapes.setdefault(shape, [0, 0])
        entry[0] += 1
        entry[1] += used or 0
    return shapes
