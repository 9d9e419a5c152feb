#!/usr/bin/env python3
"""Several trainers on one node: the node coordinator against the OS's own
sharing and a static split, side by side in one run.

Each trainer is a separate process (as torchrun starts one per GPU), built
from bench/node_member.c: a loader whose consumer sleeps a given step per
batch (0: a trainer that always waits), or the CPU trainer stand-in (a fixed
amount of single-threaded work per step, as a Python training loop's main
thread). Every scenario runs in three modes:

  coord   FF_NODE_GROUP=<unique>, FF_NODE_THREADS=--cores, each loader owns
          --cores threads and runs what the coordinator allots it at normal
          priority, the rest as spares in SCHED_IDLE (FF_NODE_TRAINER_CORES
          as the environment sets it, default auto: the cores the node's CPU use
          beside the loaders' workers measures, such as the stand-in's, are kept off
          the loaders; with 1, a core kept per loader for its trainer: on --cores 2
          with 2 loaders every loader thread is a spare)
  off     FF_NODE_GROUP=off, each loader runs --cores threads, the OS shares
  static  FF_NODE_GROUP=off, each loader runs --cores / N threads

Scenarios (N = --loaders; even loaders run RandAugment, odd ones a cheap
crop-flip-normalize pipeline, so per-sample costs are unequal):

  hungry       all trainers always wait, independent
  lockstep     all always wait, and wait for each other after every batch (DDP)
  one-stalled  loader 0 always waits, the others consume 1/(4N) of the node's
               rate each (slack)
  changing     loader 0 has slack for the first half and always waits in the
               second, loader 1 the other way round, the rest slack
  standin      all loaders always wait, beside the trainer stand-in; its step
               rate is compared with its rate alone, run as a fourth mode in
               the rotation of every repeat, and with its rate beside busy
               cores (a fifth mode, alone-busy: a copy of it on every other
               core, so that it has a core to itself while the others work,
               the most any sharing of the cores can give it where the
               cores slow each other down: shared caches and memory, SMT
               siblings, the host's power budget); the same from 1 s into
               the run on (the steady state, the start-up left out); and its
               CPU share (CPU seconds / wall: what the sharing gave it), over
               the run and from 1 s on; the medians of the per-repeat ratios
               are shown

Per trainer: images/s, stall share (time waiting for batches / wall) and the
worker threads it ran on average; per mode: node images/s and CPU use (the
members' CPU seconds from wait4 / (wall x --cores)) and the machine's busy
share from /proc/stat (other work on the machine shows there); coord/off and
coord/static for the node and each trainer, as the median over the repeats of
each repeat's ratio. A repeat runs the modes in turn and then back in the
reverse order, and each mode counts as the mean of its two runs: the modes of
a repeat run back to back, so the machine's drift between repeats cancels, and
a drift within the repeat weighs every mode alike (the JSON keeps every
repeat's ratios). Nothing but the Python standard library is needed:

  /usr/bin/python3 bench/node.py --data build/demo-data --cores 2 --seconds 4 [--repeats 3] [--json]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

HEAVY = ("decode | random_resized_crop(size=224) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9) "
         "| normalize(mean=imagenet, std=imagenet)")
LIGHT = "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
SCENARIOS = ["hungry", "lockstep", "one-stalled", "changing", "standin"]
MODES = ["off", "static", "coord"]


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def standin_rate(run, steady=False):
    """The stand-ins' mean steps/s in a run: over the whole run, or (steady) from 1 s on (None in runs
    shorter than 2 s)."""
    rates = []
    for m in run["members"]:
        if "steps_per_s" in m:
            rates.append(m.get("from_1s", {}).get("steps_per_s") if steady else m["steps_per_s"])
    return None if None in rates else sum(rates) / len(rates)


def standin_cpu_share(run, steady=False):
    """The stand-in's CPU seconds / wall (the last member's), over the whole run or from 1 s on (None in
    runs shorter than 2 s)."""
    m = run["members"][-1]
    part = m.get("from_1s") if steady else m
    return part["cpu_s"] / part["seconds"] if part else None


def run_members(args, members, mode, tag):
    """Starts every member, releases them together, returns their JSON and the CPU use."""
    env = dict(os.environ)
    n = sum(1 for m in members if "pipeline" in m)
    if mode == "coord":
        env["FF_NODE_GROUP"] = "bench-node-%d-%s" % (os.getpid(), tag)
        env["FF_NODE_THREADS"] = str(args.cores)
        env["LOCAL_WORLD_SIZE"] = str(n)
    else:
        env["FF_NODE_GROUP"] = "off"
        env.pop("FF_NODE_THREADS", None)
    threads = args.cores if mode != "static" else max(1, args.cores // max(n, 1))
    barrier = None
    lockstep = [m for m in members if m.get("lockstep")]
    if lockstep:
        fd, barrier = tempfile.mkstemp(prefix="ff-node-barrier-")
        os.write(fd, b"\0" * 64)
        os.close(fd)
    procs = []
    for m in members:
        cmd = [args.member, "--seconds", str(args.seconds)]
        if "pipeline" in m:
            cmd += ["--source", "imagefolder:" + args.data, "--pipeline", m["pipeline"], "--threads", str(threads),
                    "--batch-size", str(args.batch_size), "--steps", m.get("steps", "0"), "--seed", str(len(procs))]
            if m.get("lockstep"):
                cmd += ["--lockstep", "%s:%d" % (barrier, len(lockstep))]
        else:
            cmd += ["--standin-work", str(m["work"])]
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    time.sleep(1.0)  # every loader opened (and joined) before the clock starts
    b0, t0 = machine_busy()
    start = time.monotonic()
    for p in procs:
        try:
            p.stdin.write("go\n")
            p.stdin.flush()
        except BrokenPipeError:
            pass  # it exited at its start (it said why on stderr): its status ends the run below
    out, cpu = [], 0.0
    stuck = []  # a member still running a minute past its time is stuck: stop them all and say so

    def stop_all():
        stuck.append(1)
        for q in procs:
            q.kill()
    watchdog = threading.Timer(args.seconds + 60, stop_all)
    watchdog.start()
    for p in procs:
        text = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if stuck:
            sys.exit("bench/node.py: the %s run (%s) did not finish within %g s of its %g s: stopped"
                     % (tag, mode, args.seconds + 60, args.seconds))
        if p.returncode:
            sys.exit("bench/node.py: a member failed (exit %d)" % p.returncode)
        cpu += ru.ru_utime + ru.ru_stime
        out.append(json.loads(text))
    watchdog.cancel()
    wall = time.monotonic() - start
    b1, t1 = machine_busy()
    if barrier:
        os.unlink(barrier)
    return {"members": out, "cpu_use": cpu / (wall * args.cores), "machine_busy": (b1 - b0) / max(t1 - t0, 1),
            "threads_each": threads}


def scenario_members(name, n, rates, args):
    pipes = [HEAVY if i % 2 == 0 else LIGHT for i in range(n)]
    slack_step = []
    for i in range(n):  # a slack trainer takes 1/(4N) of what the node makes of its pipeline
        want = rates[pipes[i]] / (4.0 * n)
        slack_step.append("%.1f" % (1000.0 * args.batch_size / want))
    half = args.seconds / 2
    if name == "hungry":
        return [{"pipeline": p} for p in pipes]
    if name == "lockstep":
        return [{"pipeline": p, "lockstep": True} for p in pipes]
    if name == "one-stalled":
        return [{"pipeline": pipes[i], "steps": "0" if i == 0 else slack_step[i]} for i in range(n)]
    if name == "changing":
        steps = []
        for i in range(n):
            if i == 0:
                steps.append("%s,0@%g" % (slack_step[i], half))
            elif i == 1:
                steps.append("0,%s@%g" % (slack_step[i], half))
            else:
                steps.append(slack_step[i])
        return [{"pipeline": pipes[i], "steps": steps[i]} for i in range(n)]
    if name == "standin":
        return [{"pipeline": p} for p in pipes] + [{"work": args.standin_work}]
    raise ValueError(name)


def alone_rates(args):
    """The node's images/s on each pipeline with one loader on every core (the slack rates' base): the
    faster of two 2 s runs, since a run that another job disturbed reads low (the node's capacity is the
    undisturbed rate, and a low base would make every slack trainer slower than its scenario says)."""
    rates = {}
    saved = args.seconds
    args.seconds = 2
    for p in (HEAVY, LIGHT):
        rates[p] = max(run_members(args, [{"pipeline": p}], "off", "alone")["members"][0]["images_per_s"]
                       for _ in range(2))
    args.seconds = saved
    return rates


def calibrate_standin(args):
    """Rounds of the stand-in's work for a step of about 10 ms alone."""
    rounds = 200000
    r = subprocess.run([args.member, "--standin-work", str(rounds), "--seconds", "0.5"], input="go\n",
                       capture_output=True, text=True, check=True)
    rate = json.loads(r.stdout)["steps_per_s"]
    return max(1000, int(rounds * rate / 100.0))


def at_least(lo, kind=int):
    """An argparse type: a number of `kind`, lo or more."""
    def parse(text):
        try:
            x = kind(text)
            if not math.isfinite(x):
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError("%r is not a number" % text)
        except OverflowError:
            raise argparse.ArgumentTypeError("%s is too large" % text)
        if not x >= lo:
            raise argparse.ArgumentTypeError("%s is below %g" % (text, lo))
        return x
    return parse


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="an image folder (scripts/demo-data.py makes one)")
    ap.add_argument("--print", metavar="FILE", help="print the tables of a --json result and stop")
    ap.add_argument("--bin", default="build", help="the build folder with node_member (default build)")
    ap.add_argument("--cores", type=at_least(1), default=len(os.sched_getaffinity(0)),
                    help="the node's cores: FF_NODE_THREADS and each loader's threads (default: this process's)")
    ap.add_argument("--loaders", type=at_least(2), default=2, help="trainers with a loader, 2 or more (default 2)")
    ap.add_argument("--seconds", type=at_least(0.5, float), default=4,
                    help="length of each run, 0.5 or more (default 4; the stand-in's steady rate needs 2)")
    ap.add_argument("--batch-size", type=at_least(1), default=32)
    ap.add_argument("--repeats", type=at_least(1), default=1,
                    help="repeats, each the modes in turn and back (2 runs per mode); the repeat of median node "
                         "images/s is shown (default 1)")
    ap.add_argument("--only", default=",".join(SCENARIOS), help="scenarios, comma-separated")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.print:
        try:
            with open(args.print) as f:
                saved = json.load(f)
        except OSError as e:
            ap.error("--print: %s" % e)
        except ValueError as e:
            ap.error("--print %s: not JSON (%s)" % (args.print, e))
        try:
            config = saved["config"]
            print(json.dumps(config))
            for name, by_mode in saved["scenarios"].items():
                for r in by_mode.values():  # the simulator's stand-in steps as it does alone
                    if "standin_alone_steps_per_s" in config and "steps_per_s" in r["members"][-1]:
                        r["standin_ratio"] = r["members"][-1]["steps_per_s"] / config["standin_alone_steps_per_s"]
                print_scenario(name, by_mode)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:
            ap.error("--print %s: not the output of bench/node.py --json or fusionflow sim --json (%s: %s)"
                     % (args.print, type(e).__name__, e))
        return
    if not args.data:
        ap.error("--data is required")
    args.member = os.path.join(args.bin, "node_member")
    if not os.access(args.member, os.X_OK):
        ap.error("--bin %s: no node_member there (make build makes it in build)" % args.bin)
    args.data = os.path.abspath(args.data)
    if not os.path.isdir(args.data):
        ap.error("--data %s: not a folder (scripts/demo-data.py makes one)" % args.data)
    chosen = [s for s in args.only.split(",") if s]
    for s in chosen:
        if s not in SCENARIOS:
            ap.error("unknown scenario %s (known: %s)" % (s, ", ".join(SCENARIOS)))

    rates = alone_rates(args)
    args.standin_work = calibrate_standin(args)
    results = {"config": {"cores": args.cores, "loaders": args.loaders, "seconds": args.seconds,
                          "batch_size": args.batch_size, "repeats": args.repeats,
                          "alone_images_per_s": {"heavy": rates[HEAVY], "light": rates[LIGHT]},
                          "load_average": os.getloadavg()},
               "scenarios": {}}
    for name in chosen:
        members = scenario_members(name, args.loaders, rates, args)
        modes = MODES + (["alone", "alone-busy"] if name == "standin" else [])
        runs = {mode: [] for mode in modes}
        standins = [m for m in members if "work" in m]
        alone_members = {"alone": standins, "alone-busy": standins * args.cores}  # by itself, or a copy on every core
        for r in range(args.repeats):  # the modes in turn and back, so that a change of the machine's load hits all
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            both = {mode: [] for mode in modes}
            for i, mode in enumerate(order + order[::-1]):
                who = alone_members.get(mode, members)
                both[mode].append(run_members(args, who, "off" if mode.startswith("alone") else mode,
                                              "%s-%s-%d-%d" % (name, mode, r, i)))
            for mode in modes:
                runs[mode].append(mean_run(both[mode]))
        results["scenarios"][name] = {mode: median_run(runs[mode]) for mode in modes}
        results["scenarios"][name]["paired"] = paired_ratios(runs)
        if name == "standin":
            for mode in MODES:  # per repeat: the stand-in in the mode against alone, in the same rotation
                out = results["scenarios"][name][mode]
                for key, base, steady in (("standin_ratio", "alone", False), ("standin_busy_ratio", "alone-busy", False),
                                          ("standin_steady_busy_ratio", "alone-busy", True)):
                    pairs = [(standin_rate(a, steady), standin_rate(b, steady)) for a, b in zip(runs[mode], runs[base])]
                    if any(x is None for pair in pairs for x in pair):
                        continue  # runs shorter than 2 s have no steady rate
                    ratios = sorted(x / max(y, 1e-9) for x, y in pairs)
                    out[key + "s"] = [round(x, 3) for x in ratios]
                    out[key] = ratios[len(ratios) // 2]
                for key, steady in (("standin_cpu_share", False), ("standin_steady_cpu_share", True)):
                    shares = [standin_cpu_share(a, steady) for a in runs[mode]]
                    if None not in shares:
                        out[key] = median(shares)
        if not args.json:
            print_scenario(name, results["scenarios"][name])
    if args.json:
        print(json.dumps(results, indent=1))


def mean_run(runs):
    """One record for a mode's runs in a repeat: each number the mean of theirs, so that the ratio of two
    modes' records is the ratio of their sums (a list or key that differs between the runs is the first's)."""
    def mean(xs):
        x = xs[0]
        if isinstance(x, dict):
            return {k: mean([y[k] for y in xs]) for k in x if all(isinstance(y, dict) and k in y for y in xs)}
        if isinstance(x, list):
            same = all(isinstance(y, list) and len(y) == len(x) for y in xs)
            return [mean(list(v)) for v in zip(*xs)] if same else x
        if isinstance(x, (int, float)) and not isinstance(x, bool) and all(isinstance(y, (int, float)) for y in xs):
            return sum(xs) / len(xs)
        return x
    return mean(runs)


def median_run(runs):
    """The run of median node throughput, or of the stand-ins' steps/s when they ran without loaders (with
    --repeats 1: the run)."""
    node = lambda r: (sum(m.get("images_per_s", 0) for m in r["members"]) if "images_per_s" in r["members"][0]
                      else standin_rate(r))
    ranked = sorted(runs, key=node)
    chosen = dict(ranked[len(ranked) // 2])
    chosen["repeats_node_images_per_s"] = [round(node(r), 1) for r in runs]
    return chosen


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def paired_ratios(runs):
    """coord/off and coord/static, node images/s and each trainer's, within each repeat (its modes run
    back to back; repeats minutes apart differ by the machine's drift as much as the modes do): the
    medians over the repeats, and each repeat's ratios."""
    out = {}
    for base in ("off", "static"):
        per_node, per_trainer = [], []
        for c, b in zip(runs["coord"], runs[base]):
            loaders = [i for i, m in enumerate(b["members"]) if "images_per_s" in m]
            node = lambda r: sum(r["members"][i]["images_per_s"] for i in loaders)
            per_node.append(node(c) / max(node(b), 1e-9))
            per_trainer.append([c["members"][i]["images_per_s"] / max(b["members"][i]["images_per_s"], 1e-9)
                                for i in loaders])
        trainers = [median([t[i] for t in per_trainer]) for i in range(len(per_trainer[0]))]
        out[base] = {"node": median(per_node), "trainers": trainers, "worst_trainer": min(trainers),
                     "node_repeats": [round(x, 3) for x in per_node],
                     "trainer_repeats": [[round(x, 3) for x in t] for t in per_trainer]}
    return out


def print_scenario(name, by_mode):
    members = by_mode["off"]["members"]
    loaders = [i for i, m in enumerate(members) if "images_per_s" in m]
    print("\n%s" % name)
    print("  %-7s %8s %6s %6s %6s  %s" % ("mode", "node/s", "cpu", "busy", "thr", "per trainer: images/s (stall, threads)"))
    for mode in MODES:
        r = by_mode[mode]
        node = sum(r["members"][i]["images_per_s"] for i in loaders)
        per = "  ".join("%.0f (%.2f, %.1f)" % (r["members"][i]["images_per_s"], r["members"][i]["stall"],
                                               r["members"][i]["threads"]) for i in loaders)
        print("  %-7s %8.0f %5.0f%% %5.0f%% %6d  %s" % (mode, node, 100 * r["cpu_use"], 100 * r["machine_busy"],
                                                      r["threads_each"], per))
    if len(members) > len(loaders):  # the stand-in's; each ratio the median of the repeats' (in brackets)
        print("  stand-in %7s  %-24s %-24s %-24s %s" % ("steps/s", "x alone", "x alone-busy", "x alone-busy from 1 s",
                                                          "cpu share (from 1 s)"))
        for mode in MODES:
            r = by_mode[mode]
            cols = []
            for key in ("standin_ratio", "standin_busy_ratio", "standin_steady_busy_ratio"):
                each = r.get(key + "s")  # the simulator's runs are one
                cols.append("%.3f%s" % (r[key], " [" + " ".join("%.2f" % x for x in each) + "]" if each else "")
                            if key in r else "-")
            share = "%.3f" % r["standin_cpu_share"] if "standin_cpu_share" in r else "-"
            if "standin_steady_cpu_share" in r:
                share += " (%.3f)" % r["standin_steady_cpu_share"]
            print("  %-8s %7.1f  %-24s %-24s %-24s %s" % (mode, r["members"][-1]["steps_per_s"], cols[0], cols[1],
                                                           cols[2], share))
    for mode in ("alone", "alone-busy"):
        if mode in by_mode:
            print("  stand-in %s: %.1f steps/s (median of %s)" % (mode, standin_rate(by_mode[mode]),
                                                                  by_mode[mode]["repeats_node_images_per_s"]))
    paired = by_mode.get("paired")
    if not paired:  # one run per mode (a simulation's): its ratios
        paired = paired_ratios({m: [by_mode[m]] for m in MODES})
    for base in ("off", "static"):
        r = paired[base]
        print("  coord/%s: node %.3fx, per trainer %s (worst %.3fx)%s"
              % (base, r["node"], " ".join("%.3fx" % x for x in r["trainers"]), r["worst_trainer"],
                 "; medians of the repeats' ratios, node each repeat " + " ".join("%.3f" % x for x in r["node_repeats"])
                 if len(r["node_repeats"]) > 1 else ""))


if __name__ == "__main__":
    main()
