"""Adaptive sweep intensity: the controller that finds one run's pace from the store's response to the sweep's
own requests. Pure logic: no I/O, no clock and no sleep of its own (times come in as arguments), so every
decision is unit-tested without a store or a wait (tests/unit/sweep/pacing/test_adaptive.py).

What it measures (fed by :meth:`~airflow_atlas.sweep.targeted.TargetedSweeper.sweep_shard`, per iteration):

* ``read``: the pair's progress read at the start of each iteration - exactly one single-row SERIAL read, the
  same at every pace: the sweep's probe of the store's read latency;
* ``delete``: the time of each chunk of exactly :data:`~airflow_atlas.sweep.pacing.intensity.DELETE_CHUNK_REQUESTS`
  = 64 of a batch's deletes (the aborted writes' deletes and the ranged tombstones go in chunks spread over
  the batch's time at the pace, the first of 64: sweep/batch_deletes.py). One size at every pace, so a sample taken at
  16,000 entries/s compares with the baseline taken at 1,000 (until issue 24's first measurements the sample
  was a whole batch's deletes, a quarter second of the pace, and only batches of about 1,000 entries
  compared: at 8,000 entries/s the batch was twice the baseline's and looked like load).

The queue and commit-timestamp reads are not sampled: the next batch is read ahead in a background thread
while the current one is deleted (sweep/queue/reader.py), so their time in the iteration is not a request
latency, and a batch's commit lookup is one bulk read whose size follows the transactions in the batch.

How it decides (additive increase / multiplicative decrease on a latency target), once per window of at
least :data:`WINDOW_SECONDS`:

* a window lasts at least :data:`WINDOW_SECONDS` and :data:`MIN_WINDOW_SAMPLES` samples (at most
  :data:`MAX_WINDOW_SECONDS`); its statistic per kind is the p99 of its samples from :data:`P99_MIN_SAMPLES`
  (100) on - fewer make the nearest-rank p99 the slowest sample, one request's noise -, the p90 from 10
  samples, below that their median (one slow request among a few is noise, not load), smoothed over the
  windows (:data:`SMOOTHING`: one slow window on a busy machine is not load either; the lower of the
  smoothed statistic and the window's own is compared with the target, so the smoothed one's way down after
  a load has stopped backs nothing off);
* the baseline is kept per kind and **pace bucket** (:func:`pace_bucket`: one per doubling of the rate the
  window reached): the sweep's own requests slow the store as it speeds up, and that is not load to back
  off from (against one baseline, the latency at the slow start's 1,000 entries/s, the sweep backed off from
  itself and swept an idle store at 0.15 of its unthrottled rate: bench/results/quick-runs). A bucket's
  baseline is the lowest smoothed statistic seen there (a moving minimum); a bucket neither this run nor the
  store's profile knows takes the window's statistic as its baseline. The run starts from the store's
  **pace profile** (sweep/pacing/pace_profile.py: the buckets' baselines learned by earlier runs, a moving minimum
  over runs that one run can raise by :data:`PROFILE_RISE_PER_RUN` at most), so a run that starts while an
  application is busy compares with the quiet store's latency at each pace, not with a baseline that
  already holds the load; the baselines it measured are merged into the profile when it ends. The
  baseline rises by :data:`BASELINE_DRIFT_PER_SECOND` while the statistic stays above it, and every
  bucket's rises with it (a store slower at one pace is slower at all), so that a lasting change of the
  store's latency becomes the new baseline within a minute, while a load that starts is seen against the
  baseline of before (the drift was 5% per window until a real-node test showed a load that raised the
  latency 1.7x absorbed by it: at three windows a second the baseline rose as fast as the smoothed
  statistic). Cost: the first run on a store, if an application is busy all through it, learns that load
  as "quiet" and sweeps at full speed; any later quieter run lowers the profile again;
* the target per kind is ``baseline x latency_target`` (setting ``sweep_latency_target``), at least
  :data:`MIN_HEADROOM_SECONDS` above the baseline (sub-millisecond jitter is not load);
* a kind above its target, or any single sample of :data:`STRONG_SIGNAL_SECONDS` or more (a request that
  timed out and was retried by the driver, or an overloaded coordinator), halves the pace
  (:data:`DECREASE_FACTOR`), never below :data:`MIN_ENTRIES_PER_SECOND` (a pair is never starved);
* otherwise the pace doubles until the first back-off (slow start; x4, :data:`SLOW_START_QUIET_FACTOR`,
  after an iteration whose kinds all use at most half their headroom), then grows per window by
  :data:`QUIET_INCREASE_FACTOR` while every kind uses at most half its headroom (statistic <= baseline +
  half of target - baseline: the store is quiet, e.g. the foreground load stopped; 1.25x a window, 2.4x a
  second, so a pace halved twice is regained in about 2 s), else by :data:`ADDITIVE_INCREASE` (near the
  target the pace creeps: no oscillation around it); in the slow start it grows after every iteration whose samples
  are all within their targets, without waiting for a full window (an iteration is a quarter second of the
  pace from 2,000 entries/s, half a second at the 1,000 start: 1,000 to 64,000 entries/s in 1 s on a quiet
  store), while an iteration with a sample over
  its target only holds the pace until a full window decides (a back-off ends the slow start, so it takes
  a full window's evidence, or a single sample of :data:`STRONG_SIGNAL_SECONDS`); never above ``max_entries_per_second`` when that is not 0 (the
  setting ``sweep_max_entries_per_second`` stays the upper bound); a window that reached at most half the
  pace (the sweeper's own speed, not the pacer, held it) holds the pace (a pace the sweeper cannot reach is
  not raised without bound, so a later back-off takes effect soon; nor lowered: smaller batches would lower
  the sweeper's own speed further, their per-iteration work being the same).

An error that reaches the sweep (a timeout the driver did not retry, an overloaded error) fails the run as
before: the next run starts slowly again. The current pace and the reason of the last decision
(:attr:`AdaptiveController.reason`, e.g. ``"backed off: delete p90 38 ms > target 25 ms"``: the
statistic named is the one decided on, p99 when the window held 100 samples) are reported in
the run's result (``pace_entries_per_second``, ``pace_reason``), and so in the history, status and the
dashboard.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...validation import check_float, check_int
from .intensity import paced_batch_cap

DEFAULT_SWEEP_LATENCY_TARGET = 0.0
"""Default of ``sweep_latency_target``: off, so the default pace is the fixed rate of
``sweep_max_entries_per_second`` (issue 31 item 4: of the configurations measured side by side, the fixed 250
entries/s was the gentlest on a busy store and this controller among the harshest; docs/INTENSITY.md)."""
ADAPTIVE_LATENCY_TARGET = 1.5
"""The ``sweep_latency_target`` that turns the adaptive pace on as measured (the benchmark's ``adaptive`` and
``application`` variants): the sweep's request latencies may rise to 1.5x their baseline."""
MAX_SWEEP_LATENCY_TARGET = 100.0
"""Largest ``sweep_latency_target``."""
START_ENTRIES_PER_SECOND = 1_000.0
"""The pace a run starts at (then measures the baseline): the fixed limit measured to keep foreground p99
within 1.25x of no sweep on the project's benchmark node (bench/foreground_impact.py, docs/INTENSITY.md)."""
MIN_ENTRIES_PER_SECOND = 50.0
"""The pace never falls below this: a backed-off pair still progresses."""
WINDOW_SECONDS = 0.25
"""The controller decides at most once per this many seconds (after an iteration)..."""
MIN_WINDOW_SAMPLES = 3
"""... and only once the window holds this many samples (of any kind) ..."""
MAX_WINDOW_SECONDS = 1.0
"""... or is this long (a slow pace takes few samples)."""
SLOW_START_QUIET_FACTOR = 4.0
"""In the slow start the pace grows by this factor after an iteration whose kinds all stay within half their
headroom (quiet), else it doubles: 1,000 to 64,000 entries/s in 3 iterations instead of 6 (measured in the
foreground_impact full runs of 2026-11-27: the doubling slow start swept 20,000-26,000 entries in a run's first 2.5 s against ~75,000 unthrottled, about a tenth of a
12 s idle window)."""
DECREASE_FACTOR = 0.5
"""A back-off multiplies the pace by this."""
ADDITIVE_INCREASE = 500.0
"""After the first back-off the pace grows by this many entries/s per window (2,000 entries/s per second) while
a kind uses more than half its headroom..."""
QUIET_INCREASE_FACTOR = 1.25
"""... and by this factor per window while all use at most half of it (measured in the foreground_impact
quick runs: after a back-off in the steady phase, +500/s per window took the idle phase's whole window to
regain a third of the unthrottled rate)."""
P99_MIN_SAMPLES = 100
"""A window's statistic is its p99 from this many samples of a kind (the nearest-rank p99 of 100 is the
second slowest; of fewer, the slowest)."""
BASELINE_DRIFT_PER_SECOND = 0.02
"""The baseline rises by this fraction per second towards the smoothed latency (a run whose store stays
slower than its quietest moment - other work on the machine - is not held at the minimum pace for ever:
after about 55 s a lasting 3x is the new baseline; in the 1-2 s that smoothing takes to see a step of the
latency, the baseline rises by 2-4%, so a step above the target is seen)."""
SMOOTHING = 0.5
"""Weight of a window's statistic in the smoothed latency (the rest: the smoothed latency so far)."""
MIN_HEADROOM_SECONDS = 0.002
"""A target is at least this far above its baseline."""
STRONG_SIGNAL_SECONDS = 1.0
"""A single sample this slow backs off whatever the baseline (no healthy store request takes a second)."""
KINDS = ("read", "delete")
"""The sampled request kinds."""
PROFILE_RISE_PER_RUN = 0.1
"""A run raises the stored pace profile's latency of a pace bucket by at most this fraction
(:func:`merge_profiles`): one run under load cannot make load the profile's "quiet", while a store that has
become lastingly slower is accepted over a few runs (a run itself accepts it within a minute)."""

Profile = dict[str, dict[int, float]]
"""A pace profile: per request kind, per pace bucket (:func:`pace_bucket`), the baseline latency in seconds."""


def pace_bucket(entries_per_second: float) -> int:
    """The pace bucket of a reached rate: 0 below twice :data:`MIN_ENTRIES_PER_SECOND` (100 entries/s), then
    one per doubling (1,000 entries/s is bucket 4, 16,000 bucket 8). The store's latency of the sweep's
    requests grows with the sweep's own rate; the baseline is kept per bucket."""
    ratio = max(float(entries_per_second), MIN_ENTRIES_PER_SECOND) / MIN_ENTRIES_PER_SECOND
    return max(0, math.floor(math.log2(ratio)))


def batch_cap_at(rate: float, batch_limit: int) -> int:
    """The batch limit at pace ``rate``: as a fixed-rate run's (:func:`~.intensity.paced_batch_cap`, a window's
    worth, more below 2,000 entries/s), at most ``batch_limit``; never below 1. (Not capped further: at full speed
    the per-iteration work of smaller batches cost 58% of an unthrottled run's rate on the embedded store.)"""
    return paced_batch_cap(rate, batch_limit, interval_seconds=WINDOW_SECONDS)


def between_buckets(baselines: dict[int, float], bucket: int) -> float | None:
    """The baseline of an unknown ``bucket`` that lies between two known ones: the geometric mean of the nearest
    known below and above it (the store's latency grows with the pace, so it lies between them). A bucket the
    x4 slow start jumped over would otherwise take its first window's latency - after a back-off into it, the
    load's - as its baseline. None when ``bucket`` is not between two known buckets."""
    below = [b for b in baselines if b < bucket]
    above = [b for b in baselines if b > bucket]
    if not below or not above:
        return None
    return math.sqrt(baselines[max(below)] * baselines[min(above)])


def merge_profiles(stored: Profile, learned: Profile) -> Profile:
    """The pace profile to store after a run: per kind and bucket the lower of what the run learned and the
    stored value raised by :data:`PROFILE_RISE_PER_RUN` (a moving minimum over runs); buckets only one of
    them knows are kept as they are."""
    out: Profile = {kind: dict(buckets) for kind, buckets in stored.items()}
    for kind, buckets in learned.items():
        mine = out.setdefault(kind, {})
        for bucket, seconds in buckets.items():
            old = mine.get(bucket)
            mine[bucket] = seconds if old is None else min(seconds, old * (1 + PROFILE_RISE_PER_RUN))
    return out


def ms(seconds: float) -> str:
    """``seconds`` as milliseconds for a pace reason (one decimal below 10 ms)."""
    ms = seconds * 1000.0
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank ``q`` quantile of ``samples`` (0 < q <= 1)."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def window_statistic(samples: list[float]) -> tuple[str, float]:
    """A window's statistic of one kind, named: its p99 from :data:`P99_MIN_SAMPLES` samples on, its p90 from
    10, below that its median (one slow sample among a few is noise, not load)."""
    if len(samples) >= P99_MIN_SAMPLES:
        return "p99", percentile(samples, 0.99)
    if len(samples) >= 10:
        return "p90", percentile(samples, 0.9)
    return "p50", percentile(samples, 0.5)


@dataclass
class _Verdict:
    """One window's samples against the targets: a strong signal's text, or the worst (stat / target,
    reason text) and the smoothed statistic and baseline per kind that deciding on it stores."""

    strong: str | None = None
    worst: tuple[float, str] | None = None
    bucket: int = 0
    """The pace bucket of the window's reached rate (:func:`pace_bucket`)."""
    smoothed: dict[str, float] = field(default_factory=dict)
    baseline: dict[str, float] = field(default_factory=dict)
    quiet: bool = True
    """Every kind at most half-way from its baseline to its target."""


class AdaptiveController:
    """The pace of one run (entries per second), adjusted from the sweep's own request latencies.

    :param latency_target: allowed ratio of a request latency to its baseline (> 1).
    :param max_entries_per_second: upper bound of the pace (0: none).
    :param now: the run's start on the caller's monotonic clock.
    :param profile: the store's pace profile from earlier runs (sweep/pacing/pace_profile.py): the baseline per kind
        and pace bucket this run starts from; :meth:`profile` is what the run learned.
    """

    def __init__(self, latency_target: float, *, max_entries_per_second: int = 0, now: float,
                 profile: Profile | None = None):
        # Above 1: a ratio to the baseline latency (the setting's declaration checks its own values earlier).
        self.latency_target = check_float(latency_target, "latency_target", 1.0, MAX_SWEEP_LATENCY_TARGET)
        self.max_entries_per_second = check_int(max_entries_per_second, "max_entries_per_second", 0)
        self.rate = self._bounded(START_ENTRIES_PER_SECOND)
        self.reason = f"starting at {self.rate:,.0f} entries/s: measuring the baseline latency"
        self.baseline: Profile = {k: dict((profile or {}).get(k, {})) for k in KINDS}
        """Per kind and pace bucket: the baseline latency (seconds)."""
        self.smoothed: dict[str, float] = {}
        """Per kind: the smoothed window statistic (seconds), over the windows whatever their pace."""
        self._learned: Profile = {k: {} for k in KINDS}
        self.backoffs = 0
        self._slow_start = True
        self._samples: dict[str, list[float]] = {k: [] for k in KINDS}
        self._window_start = now
        self._window_entries = 0

    def _bounded(self, rate: float) -> float:
        rate = max(MIN_ENTRIES_PER_SECOND, rate)
        if self.max_entries_per_second:
            rate = min(rate, float(self.max_entries_per_second))
        return rate

    def batch_cap(self, batch_limit: int) -> int:
        """The batch limit at the current pace (:func:`batch_cap_at`)."""
        return batch_cap_at(self.rate, batch_limit)

    def observe(self, kind: str, seconds: float) -> None:
        """One sample: a ``read`` (the progress read) or a ``delete`` (one chunk of 64 deletes) took
        ``seconds``."""
        self._samples[kind].append(seconds)

    def observe_delete(self, seconds: float) -> None:
        """A chunk of 64 of a batch's deletes took ``seconds`` (sweep/batch_deletes.py's ``observe``)."""
        self._samples["delete"].append(seconds)

    def end_iteration(self, entries: int, now: float) -> float:
        """An iteration took ``entries`` entries; decides when a window is over (in the slow start also
        after an iteration whose samples are all within target). Returns the pace."""
        self._window_entries += entries
        elapsed = now - self._window_start
        taken = sum(len(samples) for samples in self._samples.values())
        if elapsed < WINDOW_SECONDS or (taken < MIN_WINDOW_SAMPLES and elapsed < MAX_WINDOW_SECONDS):
            if not (self._slow_start and taken and elapsed > 0):
                return self.rate
            verdict = self._measure(elapsed, self._window_entries / elapsed)
            if verdict.strong is None and verdict.worst is not None and verdict.worst[0] > 1:
                self.reason = f"holding {self.rate:,.0f} entries/s: {verdict.worst[1]} (a full window decides)"
                return self.rate  # the samples stay in the window: a full window decides
        self._decide(self._window_entries / elapsed, elapsed)
        self._window_start = now
        self._window_entries = 0
        for samples in self._samples.values():
            samples.clear()
        return self.rate

    def profile(self) -> Profile:
        """The baselines this run measured (per kind and pace bucket; the buckets it swept at), for the store's
        pace profile (:func:`merge_profiles`)."""
        return {kind: dict(buckets) for kind, buckets in self._learned.items() if buckets}

    def _measure(self, elapsed: float, reached: float) -> _Verdict:
        """The window so far (``elapsed`` seconds long, ``reached`` entries/s) against the targets of its
        pace bucket (nothing stored: :meth:`_decide` commits it)."""
        drift = (1 + BASELINE_DRIFT_PER_SECOND) ** max(0.0, elapsed)
        # At most the pace: the pacer's wait for this iteration's entries comes after it, so a short window's
        # entries / elapsed can be many times the rate the store sees on average (8 entries in 3 ms at a pace
        # of 300 entries/s read as 2,700 and filed the latency under a bucket the run never swept at).
        bucket = pace_bucket(min(reached, self.rate))
        verdict = _Verdict(bucket=bucket)
        for kind in KINDS:
            samples = self._samples[kind]
            if not samples:
                continue
            slowest = max(samples)
            if slowest >= STRONG_SIGNAL_SECONDS:
                verdict.strong = f"{kind} took {ms(slowest)} (>= {STRONG_SIGNAL_SECONDS:g} s)"
                return verdict
            name, raw = window_statistic(samples)
            previous = self.smoothed.get(kind)
            stat = verdict.smoothed[kind] = raw if previous is None else SMOOTHING * raw + (1 - SMOOTHING) * previous
            known = self.baseline[kind].get(bucket)
            if known is None:  # a bucket the x4 slow start skipped, between two known ones: their geometric mean
                known = between_buckets(self.baseline[kind], bucket)
            # A bucket neither this run nor the profile knows (and beyond the known ones): the latency at that pace
            # is its baseline (the sweep's own load there is not load to back off from) - this window's, not the
            # smoothed one, which still holds the slower pace's latency after a speed-up.
            base = verdict.baseline[kind] = max(raw, stat) if known is None else min(known * drift, stat)
            target = max(base * self.latency_target, base + MIN_HEADROOM_SECONDS)
            # Over the target only when the smoothed statistic is (one slow window is noise) and this window's
            # own is too (the smoothed one falls for a few windows after a load stops: no back-off for that).
            decided = min(raw, stat)
            ratio = decided / target
            cmp = ">" if ratio > 1 else "<="
            text = f"{kind} {name} {ms(decided)} {cmp} target {ms(target)}"
            if verdict.worst is None or ratio > verdict.worst[0]:
                verdict.worst = (ratio, text)
            if stat > base + (target - base) / 2:
                verdict.quiet = False
        return verdict

    def _decide(self, reached: float, elapsed: float) -> None:
        verdict = self._measure(elapsed, reached)
        if verdict.strong is not None:
            self._back_off(verdict.strong)
            return
        self.smoothed.update(verdict.smoothed)
        for kind, base in verdict.baseline.items():
            buckets = self.baseline[kind]
            old = buckets.get(verdict.bucket)
            if old is not None and base > old:  # drifted up: the store is slower at every pace, not only this one
                for bucket in buckets:
                    buckets[bucket] *= base / old
            buckets[verdict.bucket] = self._learned[kind][verdict.bucket] = base
        worst = verdict.worst
        if worst is None:
            self.reason = f"holding {self.rate:,.0f} entries/s: no latency sample yet"
            return
        if worst[0] > 1:
            self._back_off(worst[1])
            return
        if self._slow_start:
            grown = self.rate * (SLOW_START_QUIET_FACTOR if verdict.quiet else 2)
        elif verdict.quiet:
            grown = self.rate * QUIET_INCREASE_FACTOR
        else:
            grown = self.rate + ADDITIVE_INCREASE
        if reached <= self.rate / 2:  # the pacer did not hold the sweep back: it runs at its own speed
            # Not raised, and not lowered either: a lower pace means smaller batches, whose per-iteration work
            # (progress, history, queue cleaning) lowers what the sweeper reaches - on a saturated machine the
            # foreground_impact quick runs spiralled down to ~300 entries/s this way while unthrottled did 3,000.
            self.rate = self._bounded(min(grown, max(self.rate, 2 * reached)))
            self.reason = f"at the sweeper's own speed (~{reached:,.0f} entries/s): {worst[1]}"
        elif self.max_entries_per_second and grown >= self.max_entries_per_second:
            self.rate = float(self.max_entries_per_second)
            self.reason = f"at max ({self.max_entries_per_second:,} entries/s): {worst[1]}"
        else:
            self.rate = self._bounded(grown)
            self.reason = f"increasing: {worst[1]}" + (" (quiet: x1.25)" if verdict.quiet and not self._slow_start else "")

    def _back_off(self, why: str) -> None:
        self._slow_start = False
        self.backoffs += 1
        self.rate = self._bounded(self.rate * DECREASE_FACTOR)
        self.reason = f"backed off: {why}"


__all__ = [
    "PROFILE_RISE_PER_RUN",
    "AdaptiveController",
    "Profile",
    "ADAPTIVE_LATENCY_TARGET",
    "DEFAULT_SWEEP_LATENCY_TARGET",
    "MAX_SWEEP_LATENCY_TARGET",
    "P99_MIN_SAMPLES",
    "SLOW_START_QUIET_FACTOR",
    "START_ENTRIES_PER_SECOND",
    "batch_cap_at",
    "between_buckets",
    "merge_profiles",
    "ms",
    "pace_bucket",
    "percentile",
    "window_statistic",
]
