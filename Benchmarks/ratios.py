#!/usr/bin/env python3
"""Prints issue 12's ratio table (and issue 10's notification and lock-hold figures) from one run.

Usage:
    swift package --allow-writing-to-package-directory benchmark --no-progress \\
        --time-units nanoseconds | tee run.txt
    python3 ratios.py run.txt [--before earlier-run.txt]

Reads the plugin's default text output (the tables it prints), takes each workload's median
(p50) beside its floor from the same run, and checks issue 12's targets. Where a workload is also
timed in turns with its floor (the `… beside …` benchmarks), the check uses the median of those
per-iteration ratios; the separate rows are shown unchecked. The String insert is also shown
beside its floors, an insert with no system call into pages faulted in before timing
(`d insert 1,000 String: floor beside pwrite`) and the same into new pages the inserts fault in
themselves (`… floor in new pages beside pwrite`), and the overwrite beside its own
(`a overwrite Int: floor beside pwrite`), unchecked. Three targets compare with
"today's" engine: cold open, the struct insert's own share and the `.immediate` commit's ratio to
a raw flush. They use the same workloads from `--before` (the output of a run of main made just
before), or, without it, the reference figures below.
"""

import argparse
import sys

# "Today's" engine (main at f761f9e; this branch leaves Sources/ unchanged), p50 in nanoseconds:
# medians over several runs on the project's 2-core VM on 2026-11-22, while other sessions were
# building and testing (single runs ranged: cold open 188-264 µs, `.immediate` commit 123-874 µs,
# a struct insert's own share 5.1-6.4 µs; later runs at 37cb734 gave cold opens of 188-302 µs). For a fair comparison on another machine or day, run
# main and the change back to back and pass main's output as --before.
COLD_OPEN = ("c cold open + 1 read: TinyStorage", None)
DURABLE = ("e durable commit: TinyStorage .immediate", None)
STRUCT_OURS = ("d insert 1,000 struct: TinyStorage, beside JSONEncoder", "ours")
# The `.immediate` commit as a percentage of a raw pwrite + fdatasync taken in turns with it: the
# disk's speed swings tenfold here, so "no slower than today" is checked on this ratio, with the
# 10% by which it varied between runs of the same engine (97-114%) as the allowance.
DURABLE_RATIO = ("e durable commit: TinyStorage .immediate beside pwrite + fdatasync", "TinyStorage .immediate / pwrite")
TODAY = {COLD_OPEN: 222_000, DURABLE: 135_000, STRUCT_OURS: 5_440, DURABLE_RATIO: 109}
TODAY_SOURCE = "the reference figures built into ratios.py (engine at f761f9e, medians of several runs)"
DURABLE_ALLOWANCE = 1.1

# The plugin prints a count metric whose mean reaches 10,000 in thousands, marked in its label.
SCALES = {"(K)": 1e3, "(M)": 1e6, "(G)": 1e9}

WALL = "Time (wall clock) (ns) *"
WALL_PER_ITERATION = "Time (wall clock) (ns)"


def parse(path):
    """{benchmark name: {metric label: {"p0": …, "p50": …, …, "samples": …}}}."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    results = {}
    name = None
    columns = None
    previous = ""
    for line in lines:
        if line.startswith("╒"):
            name = previous.strip()
            results.setdefault(name, {})
            columns = None
        elif line.startswith("│") and name is not None:
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            if cells[0] == "Metric":
                columns = [cell.lower() for cell in cells[1:]]
            elif columns:
                scale = next((factor for suffix, factor in SCALES.items() if cells[0].endswith(suffix)), 1)
                values = {}
                for column, cell in zip(columns, cells[1:]):
                    try:
                        values[column] = float(cell) * (1 if column == "samples" else scale)
                    except ValueError:
                        values[column] = None
                results[name][cells[0]] = values
        elif line.startswith("╘"):
            name = None
        if line.strip():
            previous = line
    return results


class Run:
    def __init__(self, results):
        self.results = results

    def value(self, benchmark, metric=None, percentile="p50"):
        """A percentile of one metric; the wall clock (per operation or per iteration) by default."""
        metrics = self.results.get(benchmark)
        if metrics is None:
            return None
        if metric is None:
            row = metrics.get(WALL) or metrics.get(WALL_PER_ITERATION)
        else:
            row = next((values for label, values in metrics.items() if label.startswith(metric)), None)
        return None if row is None else row.get(percentile)


def ns(value):
    """Nanoseconds as a reader wants them: 68 ns, 5.16 µs, 18.7 µs, 222 µs, 3,961 µs."""
    if value is None:
        return "—"
    if value >= 100_000:
        return f"{value / 1000:,.0f} µs"
    if value >= 10_000:
        return f"{value / 1000:.1f} µs"
    if value >= 1_000:
        return f"{value / 1000:.2f} µs"
    return f"{value:.0f} ns"


def ratio_text(value):
    return "—" if value is None else f"{value:.2f}×"


def verdict(value, limit, at_least=False):
    if value is None or limit is None:
        return ""
    met = value >= limit if at_least else value <= limit
    return "✓" if met else "✗"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="the text output of one `swift package benchmark` run")
    parser.add_argument("--before", help="an earlier run's output, for the targets relative to today's engine")
    arguments = parser.parse_args()

    try:
        run = Run(parse(arguments.run))
        before = Run(parse(arguments.before)) if arguments.before else None
    except OSError as error:
        sys.exit(f"cannot read the run's output: {error}")
    if not run.results:
        sys.exit(f"no benchmark tables found in {arguments.run}")
    if before:
        today = {key: before.value(*key) for key in TODAY}
        today_source = arguments.before
    else:
        today, today_source = TODAY, TODAY_SOURCE

    v = run.value
    pwrites = {
        "appending": v("floor: pwrite 40 B, appending"),
        "preallocated": v("floor: pwrite 40 B, preallocated file"),
    }
    known = {label: value for label, value in pwrites.items() if value is not None}
    pwrite_label, pwrite = min(known.items(), key=lambda item: item[1]) if known else ("", None)
    pwrite_name = f"pwrite 40 B ({pwrite_label})" if known else "pwrite 40 B"
    mmap = v("floor: memcpy 40 B into a MAP_SHARED file mapping")
    mutex = v("floor: robust process-shared mutex lock + unlock")
    crc = v("floor: CRC-32C of 40 B")
    user_space = None if None in (mmap, mutex, crc) else mmap + mutex + crc

    print("## Floors (p50 per operation)\n")
    print("| floor | p50 |")
    print("|---|---:|")
    for name in [
        "floor: pwrite 40 B, appending",
        "floor: pwrite 40 B, preallocated file",
        "floor: memcpy 40 B into a MAP_SHARED file mapping",
        "floor: flock LOCK_EX + LOCK_UN",
        "floor: robust process-shared mutex lock + unlock",
        "floor: CRC-32C of 40 B",
        "floor: pthread mutex lock + unlock (the read baseline's lock)",
        "floor: word lock + unlock (the store's in-process lock on Linux)",
        "b read Int: locked dictionary (baseline)",
        "b read struct: locked dictionary (baseline)",
        "b read String: locked dictionary (baseline)",
        "d encode struct: JSONEncoder (baseline)",
    ]:
        print(f"| {name} | {ns(v(name))} |")
    if user_space is not None:
        print(f"| memcpy + mutex pair + CRC-32C (a commit with no system call) | {ns(user_space)} |")

    def divide(a, b):
        return None if a is None or b in (None, 0) else a / b

    rows = []

    def row(workload, value, floor_name, floor, limit=None, at_least=False, shown=None, target=None):
        ratio = divide(value, floor)
        target = target if target is not None else ("—" if limit is None else f"{'≥' if at_least else '≤'} {limit}×")
        rows.append((workload, shown or ns(value), floor_name, ns(floor) if floor_name else "", ratio_text(ratio),
                     target, verdict(ratio, limit, at_least)))

    def paired_row(workload, benchmark, metrics, limit=None):
        """A workload timed in turns with its floor (PairedMetrics in Support/InTurns.swift): the
        metrics "<workload> (ns)", "<floor> (ns)" and "<workload> / <floor> (%)"."""
        mine, floor = metrics
        share = v(benchmark, f"{mine} / {floor} (%)")
        ratio = None if share is None else share / 100
        rows.append((workload, ns(v(benchmark, f"{mine} (ns)")), floor, ns(v(benchmark, f"{floor} (ns)")),
                     ratio_text(ratio), "—" if limit is None else f"≤ {limit}×", verdict(ratio, limit)))

    paired_row("overwrite Int, 1,000 keys, single process (in turns with pwrite)",
               "a overwrite Int: TinyStorage beside pwrite", ("TinyStorage", "pwrite 40 B"), 0.35)
    paired_row("overwrite Int, 1,000 keys, another process has it open (in turns with pwrite)",
               "g overwrite Int: TinyStorage, another process has it open, beside pwrite",
               ("TinyStorage", "pwrite 40 B"), 0.35)
    overwrite_floor = "a overwrite Int: floor beside pwrite"
    paired_row("its floor: robust mutex, the Int's JSON, index, record into a mapping, CRC-32C, publish "
               "(in turns with pwrite)", overwrite_floor, ("overwrite floor", "pwrite 40 B"))
    row("overwrite Int, single process / its floor (p50s of the two in-turns runs above)",
        v("a overwrite Int: TinyStorage beside pwrite", "TinyStorage (ns)"), "overwrite floor",
        v(overwrite_floor, "overwrite floor (ns)"))
    overwrite = v("a overwrite Int: TinyStorage")
    row("overwrite Int, single process", overwrite, pwrite_name, pwrite)
    row("overwrite Int, another process has it open", v("g overwrite Int: TinyStorage, another process has it open"),
        pwrite_name, pwrite)
    row("overwrite Int, single process", overwrite, "memcpy + mutex + CRC", user_space)

    string_beside = "d insert 1,000 String: TinyStorage beside pwrite"
    floor_beside = "d insert 1,000 String: floor beside pwrite"
    paired_row("insert a 111-byte String (per insert, 1,000 into an empty store, in turns with pwrite)",
               string_beside, ("TinyStorage", "pwrite 40 B"), 0.5)
    paired_row("its floor: lock, copy, index, record into a mapping, CRC-32C, publish (in turns with pwrite)",
               floor_beside, ("insert floor", "pwrite 40 B"))
    row("insert a 111-byte String / its floor (p50s of the two in-turns runs above)",
        v(string_beside, "TinyStorage (ns)"), "insert floor", v(floor_beside, "insert floor (ns)"))
    paired_row("its floor when the inserts fault in the file's new pages themselves (in turns with pwrite)",
               "d insert 1,000 String: floor in new pages beside pwrite", ("insert floor", "pwrite 40 B"))
    string_insert = v("d insert 1,000 String: TinyStorage")
    row("insert a 111-byte String, separate benchmarks", string_insert, pwrite_name, pwrite)
    row("insert a 111-byte String, the first insert creating the store (as measured until 2026-11-23)",
        v("d insert 1,000 String: TinyStorage, creating the store"), pwrite_name, pwrite)
    ours = v(*STRUCT_OURS)
    encoder_share = v(STRUCT_OURS[0], "JSONEncoder's share")
    shown = None if ours is None else f"{ns(ours)} ({100 - encoder_share:.0f}% of the insert)"
    row("insert a 111-byte struct: ours (insert − JSONEncoder, same iteration)", ours, "today's ours",
        today.get(STRUCT_OURS), 0.5, shown=shown)
    row("insert a 111-byte struct (per insert, 1,000 into an empty store)", v("d insert 1,000 struct: TinyStorage"),
        pwrite_name, pwrite)

    for label, key, limit in [("Int", "Int", 1.1), ("111-byte struct", "struct", 1.2), ("111-byte String", "String", None)]:
        paired_row(f"cached read, {label} (in turns with the dictionary)",
                   f"b read {key}: TinyStorage beside locked dictionary", ("TinyStorage", "locked dictionary"), limit)
        row(f"cached read, {label}, separate benchmarks", v(f"b read {key}: TinyStorage"), "locked dictionary",
            v(f"b read {key}: locked dictionary (baseline)"))

    row("cold open of 1,000 keys + one read", v(*COLD_OPEN), "today's", today.get(COLD_OPEN), 0.5)

    beside = v("g read Int: TinyStorage, another process idle vs writing 1,000/s", "writing / idle (%)")
    idle = v("g read Int: TinyStorage, another process idle vs writing 1,000/s", "read, other process idle")
    writing = v("g read Int: TinyStorage, another process idle vs writing 1,000/s", "read, other process writing")
    rows.append(("cached read while another process commits 1,000/s", f"{ns(writing)}", "idle read (same iteration)",
                 ns(idle), ratio_text(None if beside is None else beside / 100), "≤ 1.2×",
                 verdict(None if beside is None else beside / 100, 1.2)))

    today_ratio = today.get(DURABLE_RATIO)
    paired_row("`.immediate` commit (in turns with a raw one)", DURABLE_RATIO[0],
               ("TinyStorage .immediate", "pwrite + fdatasync"),
               None if today_ratio is None else round(today_ratio / 100 * DURABLE_ALLOWANCE, 2))
    if today_ratio is not None:
        note = f" (today's {today_ratio / 100:.2f}× + 10%)"
        rows[-1] = rows[-1][:5] + (rows[-1][5] + note,) + rows[-1][6:]
    row("`.immediate` commit, on its own (disk speed varies: no check)", v(*DURABLE), "today's", today.get(DURABLE))

    group = "e group commit: TinyStorage .immediate, 4 threads × 500 vs 1 thread × 2,000"
    share = v(group, "4 threads / 1 thread (%)")
    single = v(group, "1 thread × 2,000 (commits/s)")
    four = v(group, "4 threads × 500 (commits/s)")
    rows.append(("durable commits/s, 4 threads × 500 (group commit)", "—" if four is None else f"{four:,.0f}/s",
                 "1 thread × 2,000", "—" if single is None else f"{single:,.0f}/s",
                 ratio_text(None if share is None else share / 100), "≥ 1.5× (flushes shared)",
                 verdict(None if share is None else share / 100, 1.5, at_least=True)))

    print("\n## Issue 12: workloads beside their floors (p50, one run)\n")
    print("| workload | p50 | compared with | its p50 | ratio | target | met |")
    print("|---|---:|---|---:|---:|---|:-:|")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print(f"\n\"today's\": {today_source}.")

    print_issue_10(v, run)


def count(value):
    return "—" if value is None else f"{value:,.0f}"


def load(value):
    """The load average the benchmark recorded (times 100) as uptime prints it."""
    return "—" if value is None or value < 0 else f"{value / 100:.2f}"


def hold_time(value):
    """A lock hold: 6.70 µs, 202 µs, 1.25 ms, 28.7 ms."""
    if value is None or value < 1_000_000:
        return ns(value)
    return f"{value / 1e6:.2f} ms" if value < 10_000_000 else f"{value / 1e6:.1f} ms"


# Issue 10 (README.md, "Notification latency (issue 10)" and "Lock holds (issue 10)").
#
# Notifications: this process commits 10,000 times to one key, one commit in flight at a time; a
# listener process, whose store announces on the main queue (the default), answers each
# notification with the commit number and the time since the commit started (the writeID
# carries both). Plain; with ~1 KiB values, so this process compacts 10 times; and with a third
# process compacting (`_compactNow()`) after every 100th commit. Missed: not announced 2 s after
# the last commit. Targets: p50 ≤ 2 ms, p99 ≤ 10 ms, 0 missed.
#
# Lock holds: commits (200 µs apart), `update`s of one shared key (500 µs) and compactions
# (20 ms) on three threads, in this process and another one, for 3 s on a 1,000-profile store;
# every hold of the cross-process lock in both processes, through the benchmark hook. Target:
# max ≤ 1 ms with `.standard`; `.immediate` reported.
#
# One full run on 2026-11-23, engine 0be1c6b, the 2-core VM beside two other sessions (uptime's
# load average 6.63 before, 3.92 after):
#
# | run | p50 | p99 | max | missed | without writeID | announced again | replaced | load | met |
# | plain | 1.25 ms | 2.26 ms | 10.72 ms | 0 | 0 | 0 | 0 | 4.28 | ✓ |
# | compactions during the run | 1.28 ms | 2.08 ms | 7.39 ms | 0 | 0 | 0 | 10 | 5.69 | ✓ |
# | data file replaced by another process | 1.36 ms | 2.19 ms | 15.40 ms | 0 | 0 | 0 | 100 | 5.00 | ✓ |
#
# | durability | holds | p50 | p99 | max | over 1 ms | load | max ≤ 1 ms |
# | .standard | 23,811 | 8.26 µs | 260 µs | 2.98 ms | 30 | 5.69 | ✗ |
# | .immediate | 8,186 | 14.0 µs | 465 µs | 7.97 ms | 30 | 5.58 | — |
#
# Why: README.md, "Issue 10: measured".


def print_issue_10(v, run):
    """Issue 10's two tables: notification latency across processes, and cross-process lock holds."""
    print("\n## Issue 10: commit here → `didChangeNotification` in another process, 10,000 commits\n")
    print("The listener's store announces on the main queue (the default); its observer runs there.\n")
    print("| run | p50 | p99 | max | missed | notifications without writeID | announced again "
          "| data file replaced | load average at start | target p50 ≤ 2 ms, p99 ≤ 10 ms, 0 missed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
    for variant in ["plain", "compactions during the run", "data file replaced by another process"]:
        name = f"g notification latency, 10,000 commits: {variant}"
        if name not in run.results:
            print(f"| {variant} | not in this run | | | | | | | | |")
            continue
        p50, p99, p100 = (v(name, "notification latency", p) for p in ("p50", "p99", "p100"))
        missed = v(name, "missed notifications")
        met = None not in (p50, p99, missed) and p50 <= 2_000 and p99 <= 10_000 and missed == 0
        micro = lambda value: "—" if value is None else f"{value / 1000:.2f} ms"
        print(f"| {variant} | {micro(p50)} | {micro(p99)} | {micro(p100)} | {count(missed)} | "
              f"{count(v(name, 'announced without writeID'))} | {count(v(name, 'announced again'))} | "
              f"{count(v(name, 'data file replaced'))} | {load(v(name, 'load average'))} | {'✓' if met else '✗'} |")

    print("\n## Issue 10: holds of the cross-process lock, commits + updates + compactions in two processes\n")
    print("| durability | holds | p50 | p99 | max | over 1 ms | commits | updates | compactions "
          "| involuntary context switches | load average at start | target max ≤ 1 ms (`.standard`) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
    for durability in [".standard", ".immediate"]:
        name = f"g lock hold, {durability}: commits, updates and compactions in two processes"
        if name not in run.results:
            print(f"| `{durability}` | not in this run | | | | | | | | | | |")
            continue
        holds = lambda percentile: hold_time(v(name, "lock hold", percentile))
        longest = v(name, "lock hold", "p100")
        target = "" if durability != ".standard" or longest is None else ("✓" if longest <= 1_000_000 else "✗")
        print(f"| `{durability}` | {count(v(name, 'lock hold', 'samples'))} | {holds('p50')} | {holds('p99')} | "
              f"{holds('p100')} | {count(v(name, 'holds over 1 ms'))} | {count(v(name, 'commits'))} | "
              f"{count(v(name, 'updates'))} | {count(v(name, 'compactions'))} | "
              f"{count(v(name, 'involuntary context switches'))} | {load(v(name, 'load average'))} | "
              f"{target or '—'} |")


if __name__ == "__main__":
    main()
