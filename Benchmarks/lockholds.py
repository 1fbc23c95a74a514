#!/usr/bin/env python3
"""Explains the long holds of TinyStorage's cross-process lock from a `perf` trace of a lock-hold run.

Usage (Linux, root or perf_event_paranoid ≤ 1; run from Benchmarks/ after a release build):
    perf record -a -o perf.data \\
        -e 'sched:sched_switch/call-graph=fp/' -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit \\
        -e 'cpu-clock/call-graph=fp,freq=2000/' \\
        -- .build/release/TinyStorageBenchmarks --filter 'g lock hold, .standard.*'
    perf script -i perf.data -F comm,pid,tid,time,event,trace,ip,sym > perf.txt
    python3 lockholds.py perf.txt [--over 1000]

A hold runs from the return of `flock(LOCK_EX)` to the call of `flock(LOCK_UN)` on one thread of
the benchmark's processes (both are `TinyStorageBenc`). For each hold over the threshold (µs) it
prints how long the holder was on a CPU, off it while runnable (R: preempted), and off it while
blocked (D: waiting for I/O, with the kernel stack; S: sleeping), which flush the holder's process
had under way when it blocked, which thread ran first when it was preempted (its own process, the
other benchmark process, or another program), where the on-CPU samples inside long holds fell,
and each kind's on-CPU time per hold: what a hold costs with a CPU to itself and no wait. A hold that renames a file is a compaction's swap; every other one is a commit,
an update, or a compaction that found the file already replaced.
"""

import argparse
import collections
import re

HEAD = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
FLOCK, RENAMEAT, PWRITE, FSYNC, FDATASYNC = 73, 264, 18, 74, 75  # x86_64 system call numbers
SYNCS = {FSYNC: "fsync", FDATASYNC: "fdatasync"}
LOCK_EX, LOCK_UN = 2, 8


def records(path):
    """(comm, pid, tid, seconds, event, fields, stack) for each event of `perf script` output."""
    current = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = HEAD.match(line)
            if match:
                if current:
                    yield current
                comm, pid, tid, time, event, fields = match.groups()
                current = (comm, int(pid), int(tid), float(time), event.split("/")[0], fields, [])
            elif line.strip() and current:
                current[6].append(line.split(None, 1)[-1].strip())
    if current:
        yield current


class Thread:
    def __init__(self):
        self.locking = False
        self.hold = None
        self.off = None
        self.sync = None


def holds_in(path):
    """The holds, and the flushes (fsync, fdatasync) that ran in the same processes meanwhile."""
    events = list(records(path))
    ours = {pid for comm, pid, tid, *_ in events if comm == "TinyStorageBenc" and pid == tid}
    threads = collections.defaultdict(Thread)
    holds, syncs = [], []
    process_of = {tid: pid for comm, pid, tid, *_ in events}
    names = {pid: comm for comm, pid, tid, *_ in events if pid == tid}
    for comm, pid, tid, time, event, fields, stack in events:
        if event == "sched:sched_switch":
            previous = int(re.search(r"prev_pid=(\d+)", fields).group(1))
            following = int(re.search(r"next_pid=(\d+)", fields).group(1))
            state = re.search(r"prev_state=(\S+)", fields).group(1)[0]
            if previous in threads and threads[previous].hold:
                taker, thread_name = process_of.get(following), re.search(r"next_comm=(.*?) next_pid", fields).group(1)
                taker = (f"the holder's own process, thread '{thread_name}'" if taker == process_of.get(previous)
                         else f"the other benchmark process, thread '{thread_name}'" if taker in ours
                         else names.get(taker, thread_name))
                threads[previous].off = (time, state, stack, taker)
            if following in threads and threads[following].hold and threads[following].off:
                start, state, where, taker = threads[following].off
                threads[following].hold["off"].append((state, time - start, where, start, taker))
                threads[following].off = None
            continue
        if pid not in ours:
            continue
        thread = threads[tid]
        if event == "cpu-clock":
            if thread.hold:
                thread.hold["samples"].append(stack)
        elif event == "raw_syscalls:sys_enter":
            number, arguments = re.match(r"NR (\d+) \(([^)]*)\)", fields).groups()
            number, arguments = int(number), arguments.split(", ")
            operation = int(arguments[1], 16) if number == FLOCK else 0
            if number == FLOCK and operation & LOCK_EX:
                thread.locking = True
            elif number == FLOCK and operation & LOCK_UN and thread.hold:
                thread.hold["duration"] = time - thread.hold["start"]
                holds.append(thread.hold)
                thread.hold, thread.off = None, None
            elif thread.hold and number == RENAMEAT:
                thread.hold["kind"] = "compaction swap"
            elif thread.hold and number == PWRITE:
                thread.hold["written"] += int(arguments[2], 16)
            if number in SYNCS:
                thread.sync = (time, SYNCS[number])
        elif event == "raw_syscalls:sys_exit" and thread.locking and fields.startswith(f"NR {FLOCK} "):
            thread.locking = False
            thread.hold = {"start": time, "off": [], "samples": [], "kind": "other", "written": 0, "tid": tid,
                           "pid": pid}
        elif event == "raw_syscalls:sys_exit" and thread.sync:
            start, name = thread.sync
            syncs.append({"start": start, "end": time, "name": name, "pid": pid, "tid": tid})
            thread.sync = None
    return holds, syncs


def flushes_during(hold, start, syncs):
    """The flushes of the holder's process, on other threads, under way at `start`."""
    return sorted({sync["name"] for sync in syncs if sync["pid"] == hold["pid"] and sync["tid"] != hold["tid"]
                   and sync["start"] <= start <= sync["end"]})


def frames(stack):
    """A blocked thread's stack, from the kernel's wait up to the first TinyStorage function."""
    names = []
    for frame in stack[1:]:
        name = frame.split("+")[0].split(" ", 1)[-1]
        names.append(name[:60])
        if name.startswith("$s11TinyStorage"):
            break
    return " < ".join(names)


def micro(seconds):
    return f"{seconds * 1e6:,.0f} µs"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="the output of `perf script` (see above)")
    parser.add_argument("--over", type=float, default=1000, help="holds longer than this many µs are explained")
    arguments = parser.parse_args()
    holds, syncs = holds_in(arguments.trace)
    if not holds:
        raise SystemExit("no lock holds of TinyStorageBenc processes in this trace")
    durations = sorted(hold["duration"] for hold in holds)
    print(f"{len(holds)} holds: p50 {micro(durations[len(durations) // 2])}, "
          f"p99 {micro(durations[int(len(durations) * 0.99)])}, max {micro(durations[-1])}\n")

    totals, blocked, sampled, beside, takers = (collections.Counter() for _ in range(5))
    long = sorted((hold for hold in holds if hold["duration"] > arguments.over / 1e6), key=lambda h: -h["duration"])
    print(f"holds over {arguments.over:,.0f} µs: {len(long)}")
    for hold in long:
        off = collections.Counter()
        for state, seconds, stack, start, taker in hold["off"]:
            off[state] += seconds
            if state == "R":
                takers[taker] += seconds
            if state in "DS":
                blocked[frames(stack)] += seconds
                beside[", ".join(flushes_during(hold, start, syncs)) or "no flush"] += seconds
        on_cpu = hold["duration"] - sum(off.values())
        totals[(hold["kind"], "on CPU")] += on_cpu
        for state, seconds in off.items():
            totals[(hold["kind"], f"off CPU, {state}")] += seconds
        for stack in hold["samples"]:
            sampled[" < ".join(frame.split(" ", 1)[-1] for frame in stack[:3])] += 1
        written = f"{hold['written']:,} B written" if hold["kind"] == "compaction swap" else ""
        print(f"  {micro(hold['duration']):>10}  {hold['kind']:<15}  on CPU {micro(on_cpu):>9}  "
              + ", ".join(f"{state} {micro(seconds)}" for state, seconds in sorted(off.items()))
              + (f"  ({written})" if written else ""))
    print("\ntime inside those holds:")
    for (kind, where), seconds in sorted(totals.items()):
        print(f"  {kind:<15} {where:<12} {seconds * 1e3:8.1f} ms")
    print("\nwhere holders blocked (kernel stack, up to TinyStorage):")
    for stack, seconds in blocked.most_common(5):
        print(f"  {seconds * 1e3:8.1f} ms  {stack}")
    print("\nflushes that another thread of the holder's process had under way when it blocked:")
    for flushes, seconds in beside.most_common():
        print(f"  {seconds * 1e3:8.1f} ms  {flushes}")
    print("\nwho ran first when a holder lost its CPU while it could have run on (R):")
    for taker, seconds in takers.most_common(6):
        print(f"  {seconds * 1e3:8.1f} ms  {taker}")
    print("\non-CPU samples inside those holds (innermost frames):")
    for stack, count in sampled.most_common(8):
        print(f"  {count:5}  {stack[:300]}")

    print("\non-CPU time per hold (the hold minus its time off CPU):")
    by_kind = collections.defaultdict(list)
    for hold in holds:
        by_kind[hold["kind"]].append(hold["duration"] - sum(seconds for _, seconds, *_ in hold["off"]))
    for kind, values in sorted(by_kind.items()):
        values.sort()
        print(f"  {kind:<15} {len(values):6} holds: p50 {micro(values[len(values) // 2])}, "
              f"p99 {micro(values[int(len(values) * 0.99)])}, max {micro(values[-1])}")


if __name__ == "__main__":
    main()
