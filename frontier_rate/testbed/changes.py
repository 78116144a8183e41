"""When pages change: rate distributions and change models.

Every page owns a change process: a reproducible sequence of simulated times
at which its content really changes. The sequence is drawn lazily from a
``random.Random`` seeded by a string, so the ground truth is exact, the same
on every run and independent of how fast or in which order it is queried.

All rates are changes per SIMULATED second; ``DAY`` converts per-day rates
(``rate_min=0.5 / DAY``). Every model keeps the page's long-run mean rate:

- ``poisson``: exponential gaps of mean 1/rate.
- ``bursty``: a renewal process of bursts. A burst has a geometric number of
  edits (mean ``burst_size``) spaced by exponential gaps of mean
  ``burst_spread / rate``, followed by a quiet exponential gap chosen so that
  one cycle lasts ``burst_size / rate`` on average; by the renewal-reward
  theorem the long-run rate is exactly ``rate``.
- ``periodic``: gaps of ``(1 + jitter * U(-1, 1)) / rate`` after a uniform
  random phase; the gap variance is ``jitter**2 / (3 rate**2)``, against
  ``1 / rate**2`` for Poisson.
- ``drifting``: an inhomogeneous Poisson process with intensity
  ``rate * exp(A sin(2 pi t / P + phase)) / I0(A)``; since the mean of
  ``exp(A sin)`` over a period is the modified Bessel value ``I0(A)``, the
  average intensity over whole periods is ``rate``. Drawn by thinning.
"""

from __future__ import annotations

import bisect
import math
import random
import threading
from collections.abc import Iterator

DAY = 86400.0
"""Seconds in a simulated day: ``rate=2 / DAY`` means two changes per day."""

CHANGE_MODELS = ("poisson", "bursty", "periodic", "drifting")
RATE_DISTRIBUTIONS = ("loguniform", "pareto")

BURST_SIZE = 4.0
BURST_SPREAD = 0.02
PERIODIC_JITTER = 0.1
DRIFT_AMPLITUDE = 1.0
DRIFT_PERIOD = 7 * DAY
PARETO_SHAPE = 1.2


def bessel_i0(x: float) -> float:
    """Modified Bessel function I0(x) by its power series sum ((x/2)^k / k!)^2."""
    term, total, k = 1.0, 1.0, 0
    while term > 1e-17 * total:
        k += 1
        term *= (x / (2.0 * k)) ** 2
        total += term
    return total


def draw_rates(
    n: int,
    distribution: str,
    rate_min: float,
    rate_max: float,
    rng: random.Random,
    *,
    pareto_shape: float = PARETO_SHAPE,
) -> list[float]:
    """Draw ``n`` mean change rates (per simulated second) in ``[rate_min, rate_max]``.

    ``loguniform``: log(rate) uniform. ``pareto``: a Pareto law of shape
    ``pareto_shape`` truncated to the interval (most pages slow, a heavy tail
    of fast ones), drawn by inverting its CDF.
    """
    if distribution not in RATE_DISTRIBUTIONS:
        raise ValueError(
            f"rate_distribution={distribution!r}: expected one of {RATE_DISTRIBUTIONS}"
        )
    if not (rate_min > 0 and math.isfinite(rate_min)):
        raise ValueError(f"rate_min={rate_min!r}: must be a positive finite number")
    if not (rate_max >= rate_min and math.isfinite(rate_max)):
        raise ValueError(f"rate_max={rate_max!r}: must be finite and >= rate_min={rate_min}")
    if not pareto_shape > 0:
        raise ValueError(f"pareto_shape={pareto_shape!r}: must be positive")
    if distribution == "loguniform":
        lo, hi = math.log(rate_min), math.log(rate_max)
        return [math.exp(rng.uniform(lo, hi)) for _ in range(n)]
    tail = (rate_min / rate_max) ** pareto_shape
    return [
        min(rate_max, rate_min * (1.0 - rng.random() * (1.0 - tail)) ** (-1.0 / pareto_shape))
        for _ in range(n)
    ]


class ChangeProcess:
    """The real change times of one page, generated lazily and deterministically.

    ``seed`` is any string or int; the same (model, rate, seed, parameters)
    always yields the same times. Thread-safe.
    """

    def __init__(
        self,
        model: str,
        rate: float,
        seed: str | int,
        *,
        burst_size: float = BURST_SIZE,
        burst_spread: float = BURST_SPREAD,
        jitter: float = PERIODIC_JITTER,
        drift_amplitude: float = DRIFT_AMPLITUDE,
        drift_period: float = DRIFT_PERIOD,
    ) -> None:
        if model not in CHANGE_MODELS:
            raise ValueError(f"change_model={model!r}: expected one of {CHANGE_MODELS}")
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rate={rate!r}: must be a positive finite number")
        if not burst_size >= 1:
            raise ValueError(f"burst_size={burst_size!r}: must be >= 1")
        if not 0 <= burst_spread * (burst_size - 1) < burst_size:
            raise ValueError(f"burst_spread={burst_spread!r}: bursts would outlast their cycle")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter={jitter!r}: must be in [0, 1)")
        if not (drift_amplitude >= 0 and drift_period > 0):
            raise ValueError(
                f"drift_amplitude={drift_amplitude!r}, drift_period={drift_period!r}: "
                "need amplitude >= 0 and period > 0"
            )
        self.model = model
        self.rate = float(rate)
        self._params = (burst_size, burst_spread, jitter, drift_amplitude, drift_period)
        self._rng = random.Random(f"frontier-rate-change/{model}/{seed}")
        self._phase = self._rng.uniform(0.0, 2 * math.pi) if model == "drifting" else 0.0
        self._gen = getattr(self, f"_{model}")()
        self._times: list[float] = []
        self._lock = threading.Lock()

    def times_until(self, t: float) -> list[float]:
        """All change times ``<= t`` (a new list, ascending)."""
        with self._lock:
            self._extend(t)
            return self._times[: bisect.bisect_right(self._times, t)]

    def version_at(self, t: float) -> int:
        """Number of changes at times ``<= t``: the page's content version at ``t``."""
        with self._lock:
            self._extend(t)
            return bisect.bisect_right(self._times, t)

    def last_change_before(self, t: float) -> float | None:
        """Time of the last change ``<= t``, or None if the page never changed."""
        with self._lock:
            self._extend(t)
            i = bisect.bisect_right(self._times, t)
            return self._times[i - 1] if i else None

    def _extend(self, t: float) -> None:
        while not self._times or self._times[-1] <= t:
            self._times.append(next(self._gen))

    def _poisson(self) -> Iterator[float]:
        t = 0.0
        while True:
            t += self._rng.expovariate(self.rate)
            yield t

    def _bursty(self) -> Iterator[float]:
        size, spread = self._params[0], self._params[1]
        edit_gap = spread / self.rate
        quiet_mean = size / self.rate - (size - 1) * edit_gap
        stop = 1.0 / size
        t = 0.0
        while True:
            t += self._rng.expovariate(1.0 / quiet_mean)
            yield t
            while self._rng.random() >= stop:
                t += self._rng.expovariate(1.0 / edit_gap) if edit_gap > 0 else 0.0
                yield t

    def _periodic(self) -> Iterator[float]:
        jitter = self._params[2]
        mean_gap = 1.0 / self.rate
        t = self._rng.uniform(0.0, mean_gap)
        while True:
            yield t
            t += mean_gap * (1.0 + jitter * self._rng.uniform(-1.0, 1.0))

    def intensity(self, t: float) -> float:
        """Instantaneous change intensity at ``t`` (constant except for ``drifting``)."""
        if self.model != "drifting":
            return self.rate
        amplitude, period = self._params[3], self._params[4]
        return self.rate * math.exp(
            amplitude * math.sin(2 * math.pi * t / period + self._phase)
        ) / bessel_i0(amplitude)

    def _drifting(self) -> Iterator[float]:
        amplitude = self._params[3]
        peak = self.rate * math.exp(amplitude) / bessel_i0(amplitude)
        t = 0.0
        while True:
            t += self._rng.expovariate(peak)
            if self._rng.random() * peak <= self.intensity(t):
                yield t

