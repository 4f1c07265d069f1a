"""What p99 / p50 a queue allows at 70% load, by CPU count: the yardstick for load.py's tail goal.

``load.py`` judges each operation's p99 against 5 times its p50 at 70% of the capacity it
measured. How far a perfect server can get below that depends on how many requests run
at once, not on the code: this simulates ``--servers`` CPUs fed by Poisson arrivals of
load.py's mix (70% recall, 20% remember, 10% short operations), with service times in
proportion to what each takes alone (recall 1, remember 0.8, a short one 0.4; the unit
cancels out of the ratio), fixed or exponentially spread (the two ends of what a real
service looks like), and served in order of arrival (``fifo``) or all at once with the
CPUs shared evenly (``shared``, what threads on one interpreter approach).

    .venv/bin/python benchmarks/queue_model.py --output benchmarks/results/queue_model.json
"""

import argparse
import heapq
import json
import math
import random
from pathlib import Path

# (operation, share of the requests, service time relative to a recall)
MIX = (("recall", 0.70, 1.0), ("remember", 0.20, 0.8), ("short", 0.10, 0.4))


def arrivals(cpus: int, load: float, spread: str, count: int, rng: random.Random) -> list[tuple[float, str, float]]:
    """``count`` requests as (arrival, operation, service time), offered at ``load`` of ``cpus``' capacity."""
    mean = sum(share * service for _, share, service in MIX)
    rate = load * cpus / mean
    moment, requests = 0.0, []
    for _ in range(count):
        moment += rng.expovariate(rate)
        operation, _, service = rng.choices(MIX, weights=[share for _, share, _ in MIX])[0]
        requests.append((moment, operation, rng.expovariate(1 / service) if spread == "exponential" else service))
    return requests


def fifo(cpus: int, requests) -> list[tuple[str, float]]:
    """Each request waits for the first free CPU, in order of arrival; return (operation, response time)."""
    free = [0.0] * cpus
    answers = []
    for arrived, operation, service in requests:
        done = max(heapq.heappop(free), arrived) + service
        heapq.heappush(free, done)
        answers.append((operation, done - arrived))
    return answers


def shared(cpus: int, requests) -> list[tuple[str, float]]:
    """Every request in the system runs at once; each gets min(1, cpus / running) of a CPU."""
    answers, running, now, index = [], {}, 0.0, 0  # running: number -> [work left, arrival, operation]
    while index < len(requests) or running:
        speed = min(1.0, cpus / len(running)) if running else 0.0
        to_finish = min((left for left, _, _ in running.values()), default=math.inf) / speed if running else math.inf
        to_arrive = requests[index][0] - now if index < len(requests) else math.inf
        step = min(to_finish, to_arrive)
        now += step
        for number, job in list(running.items()):
            job[0] -= step * speed
            if job[0] <= 1e-12:
                del running[number]
                answers.append((job[2], now - job[1]))
        if step == to_arrive:
            arrived, operation, service = requests[index]
            running[index] = [service, arrived, operation]
            index += 1
    return answers


def ratios(answers: list[tuple[str, float]]) -> dict:
    """p99 / p50 of each operation's response times."""
    result = {}
    for operation, _, _ in MIX:
        times = sorted(seconds for name, seconds in answers if name == operation)
        result[operation] = round(times[int(0.99 * len(times))] / times[len(times) // 2], 1)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", default="2,4,8,16", help="CPU counts, comma-separated")
    parser.add_argument("--load", type=float, default=0.7)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/queue_model.json"))
    args = parser.parse_args()
    rows = []
    for cpus in (int(part) for part in args.cpus.split(",")):
        for spread in ("fixed", "exponential"):
            requests = arrivals(cpus, args.load, spread, args.requests, random.Random(args.seed))
            for discipline, serve in (("fifo", fifo), ("shared", shared)):
                row = {"cpus": cpus, "service": spread, "discipline": discipline, **ratios(serve(cpus, requests))}
                rows.append(row)
                print(json.dumps(row))
    result = {"load": args.load, "mix": MIX, "requests": args.requests, "seed": args.seed, "p99_over_p50": rows}
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
