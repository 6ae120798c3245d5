#!/usr/bin/env python3
"""A bad-input and real-size probe of remat-plan, for developers; not part of CI.

Runs the built remat-plan on
  * malformed and adversarial chain files (mutations of valid ones: cut, spliced, bytes flipped,
    numbers replaced by 1e308, -1, 1e25, 2^63, NaN-like text, deep nesting, empty), and
  * real-size chains (sizes up to 10^3..10^11 bytes, 2..300 stages) at budgets from below the
    minimum to above the store-all peak, with every chain policy and both MILP solvers,
and sorts every run into: ok, clean error (exit 1 or 2 with a message), crash (a signal, or
another exit code), hang (past the time limit plus a margin), out of memory (std::bad_alloc or
killed by the memory limit). On the budget runs it checks what the plans claim: peak <= budget,
checkmate (proven optimal) no slower than rotor at the same budget and never infeasible where
rotor or store_all plans, and --find-minimum's answer plans when re-run.

usage: scripts/probe_remat_plan.py [--exe build/examples/remat-plan] [--files N] [--chains N]
                                   [--time-limit S] [--seed K] [--jobs J]
Prints a table; exits 1 when a crash, hang, out-of-memory run or broken claim was seen.
"""
import argparse
import concurrent.futures
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

MARGIN = 1.0  # seconds past the time limit (process start, loading, the stated margins)
MEMORY_LIMIT = 4 << 30  # bytes of address space per run


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(exe, args, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run([exe] + args, capture_output=True, text=True, errors="replace", timeout=timeout,
                           preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return {"kind": "hang", "seconds": time.monotonic() - t0, "args": args}
    took = time.monotonic() - t0
    out = {"code": p.returncode, "seconds": took, "stdout": p.stdout, "stderr": p.stderr,
           "args": args}
    if "bad_alloc" in p.stderr or "out of memory" in p.stderr.lower():
        out["kind"] = "oom"
    elif p.returncode == 0:
        out["kind"] = "ok"
    elif p.returncode in (1, 2) and p.stderr.strip():
        out["kind"] = "clean"
    else:
        out["kind"] = "crash"
    return out


def random_chain(rng, stages, max_bytes):
    def size():
        return max(1, int(10 ** (rng.random() * max_bytes)))
    st = []
    for i in range(stages):
        a = size()
        s = {"forward_time": rng.uniform(1e-4, 1e-2), "backward_time": rng.uniform(2e-4, 2e-2),
             "output_bytes": a, "saved_bytes": a + (size() if rng.random() < 0.7 else 0)}
        if rng.random() < 0.3:
            s["forward_overhead_bytes"] = size()
        if rng.random() < 0.3:
            s["backward_overhead_bytes"] = size()
        st.append(s)
    st[-1]["output_bytes"] = st[-1]["saved_bytes"] = 4
    return {"name": f"probe{stages}_{max_bytes}", "input_bytes": size(), "stages": st}


ADVERSARIAL = ["1e308", "-1", "1e25", "9223372036854775808", "-0", "1e-320", "NaN", "Infinity",
               "\"\"", "null", "[]", "{}", "true", "18446744073709551616", "0.5", "1e15"]


def mutate(rng, text):
    b = bytearray(text.encode())
    choice = rng.randrange(8)
    if choice == 0 and b:  # cut
        del b[rng.randrange(len(b)):]
    elif choice == 1 and b:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif choice == 2:  # replace a number
        s = b.decode(errors="replace")
        digits = [i for i, c in enumerate(s) if c.isdigit()]
        if digits:
            i = rng.choice(digits)
            j = i
            while j < len(s) and (s[j].isdigit() or s[j] in ".eE+-"):
                j += 1
            s = s[:i] + rng.choice(ADVERSARIAL) + s[j:]
        b = bytearray(s.encode())
    elif choice == 3:  # deep nesting
        d = rng.randint(100, 100000)
        b = bytearray(b"[" * d + b"]" * d)
    elif choice == 4 and b:  # duplicate a slice
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randint(1, 64))
        b[i:i] = b[i:j]
    elif choice == 5:  # drop a key
        s = b.decode(errors="replace")
        for key in ["\"stages\"", "\"output_bytes\"", "\"input_bytes\"", "\"saved_bytes\"",
                    "\"forward_time\""]:
            if key in s and rng.random() < 0.5:
                s = s.replace(key, "\"x" + key[1:], 1)
        b = bytearray(s.encode())
    elif choice == 6:
        b = bytearray(b"")
    else:  # a stage list with odd values
        c = json.loads(text)
        for st in c["stages"]:
            k = rng.choice(list(st.keys()))
            st[k] = rng.choice([1e308, -1, 1e25, 2**63, 0, 1e15, "x", None, [], 1e-320])
        b = bytearray(json.dumps(c).encode())
    return bytes(b)


def peak_and_time(r):
    try:
        j = json.loads(r["stdout"])
    except (ValueError, KeyError):
        return None
    if j.get("status") != "ok":
        return None
    return j.get("peak_bytes"), j.get("makespan"), j.get("optimal")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", default="build/examples/remat-plan")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--chains", type=int, default=26)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="remat-probe-")
    tl = a.time_limit
    policies = ["store_all", "periodic", "revolve", "rotor", "checkmate"]
    solvers = ["cbc", "lpsolve"]

    def plan(path, budget, policy, extra=()):
        args = ["--chain", path, "--budget", str(budget), "--policy", policy, "--json",
                "--time-limit", str(tl)] + list(extra)
        return run(a.exe, args, tl + MARGIN + (tl * 40 if "--find-minimum" in extra else 0))

    counts = {}
    problems = []

    def count(group, r):
        counts.setdefault(group, {}).setdefault(r["kind"], 0)
        counts[group][r["kind"]] += 1
        if r["kind"] in ("crash", "hang", "oom"):
            problems.append((group, r["kind"], " ".join(r["args"]), r.get("stderr", "")[-300:]))

    # 1. Malformed and adversarial files.
    seeds = [json.dumps(random_chain(rng, rng.randint(2, 8), rng.randint(1, 11)))
             for _ in range(20)]
    jobs = []
    for n in range(a.files):
        path = os.path.join(tmp, f"bad{n}.json")
        with open(path, "wb") as f:
            f.write(mutate(rng, rng.choice(seeds)))
        policy = rng.choice(policies + ["checkmate"])
        extra = ["--solver", rng.choice(solvers)] if policy == "checkmate" else []
        budget = rng.choice(["1GiB", "0", "1", "9223372036854775807", "100", "64MiB"])
        jobs.append((path, budget, policy, extra))
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for r in ex.map(lambda j: plan(*j[:3], j[3]), jobs):
            count("malformed files", r)

    # 2. Real sizes: budgets around each chain's minimum and store-all peak.
    budget_jobs = []
    stage_counts = [2, 3, 5, 8, 12, 20, 40, 60, 100, 300]
    for n in range(a.chains):
        stages = stage_counts[n % len(stage_counts)]
        c = random_chain(rng, stages, 3 + n % 9)
        path = os.path.join(tmp, f"chain{n}.json")
        with open(path, "w") as f:
            json.dump(c, f)
        sa = plan(path, 2**62, "store_all")
        count("real sizes", sa)
        top = peak_and_time(sa)[0] if peak_and_time(sa) else 2**40
        mn = plan(path, 0, "rotor")
        count("real sizes", mn)
        low = 1
        try:
            low = json.loads(mn["stdout"]).get("minimum_budget_bytes") or 1
        except (ValueError, KeyError):
            pass
        budgets = sorted({low - 1, low, (low + top) // 2, top, top + 1,
                          low + int(rng.random() * max(1, top - low))})
        for b in budgets:
            if b < 0:
                continue
            budget_jobs.append((path, b, stages))
    results = {}

    def all_policies(job):
        path, b, stages = job
        out = {}
        for p in policies:
            if p == "checkmate":
                for s in solvers:
                    out[p + "/" + s] = plan(path, b, p, ["--solver", s])
            else:
                out[p] = plan(path, b, p)
        return job, out

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for job, out in ex.map(all_policies, budget_jobs):
            results[job] = out
            for r in out.values():
                count("real sizes", r)
    broken = []
    for (path, b, stages), out in results.items():
        for name, r in out.items():
            pt = peak_and_time(r)
            if pt and pt[0] is not None and pt[0] > b:
                broken.append(f"{name} on {path} at {b}: peak {pt[0]} over the budget")
        rot = peak_and_time(out["rotor"])
        sa = peak_and_time(out["store_all"])
        for s in solvers:
            cm = out["checkmate/" + s]
            pt = peak_and_time(cm)
            if stages > 40 or cm["kind"] == "hang":
                continue  # too large to solve within the limit: only the crash/hang counts matter
            rival = min([x[1] for x in (rot, sa) if x], default=None)
            if rival is not None and pt is None and "time limit" not in cm["stderr"] \
                    and "max_variables" not in cm["stderr"]:
                broken.append(f"checkmate/{s} on {path} at {b}: no plan where rotor/store_all "
                              f"plans ({cm['stderr'].strip()[:200]})")
            if rival is not None and pt and pt[2] and pt[1] > rival * (1 + 1e-9) + 1e-12:
                broken.append(f"checkmate/{s} on {path} at {b}: {pt[1]} s, slower than "
                              f"{rival} s")
    # 3. --find-minimum: the minimum reported must plan when re-run.
    minima = 0
    for n in range(a.chains):
        path = os.path.join(tmp, f"chain{n}.json")
        if stage_counts[n % len(stage_counts)] > 12:
            continue
        for s in solvers:
            r = plan(path, 1, "checkmate", ["--solver", s, "--find-minimum"])
            count("find-minimum", r)
            try:
                m = json.loads(r["stdout"]).get("minimum_budget_bytes")
            except (ValueError, KeyError):
                m = None
            if m is None:
                continue
            minima += 1
            again = plan(path, m, "checkmate", ["--solver", s])
            count("find-minimum", again)
            if again["kind"] != "ok":
                broken.append(f"checkmate/{s} on {path}: --find-minimum said {m}, which "
                              f"re-runs as: {again['stderr'].strip()[:200]}")

    kinds = ["ok", "clean", "crash", "hang", "oom"]
    print(f"| runs | {' | '.join(kinds)} |")
    print("|---|" + "---|" * len(kinds))
    for group, c in counts.items():
        print(f"| {group} ({sum(c.values())}) | " + " | ".join(str(c.get(k, 0)) for k in kinds)
              + " |")
    print(f"minima re-run: {minima}; broken claims: {len(broken)}")
    for b in broken[:40]:
        print("  BROKEN", b)
    for p in problems[:40]:
        print("  PROBLEM", p)
    return 1 if broken or problems else 0


if __name__ == "__main__":
    sys.exit(main())
