#!/usr/bin/env python3
"""Times one exported model (.pt2) under PyTorch, eager or Inductor, at one thread count.

    torch_bench.py MODEL.pt2 INPUTS_DIR --threads T --runs N --warmup W --mode eager|inductor

Prints one JSON object on the last line of stdout (median_ms, p10_ms, p90_ms, runs, load_s and, for
inductor, compile_s: the wall time of the first call, which is when torch.compile compiles).
scripts/bench/bench.py runs it once per (model, mode, thread count) in a fresh process, because
PyTorch's thread pools cannot be resized reliably once they have started. With --cache-dir and
--compile-only it fills a persistent Inductor cache ahead of the timing runs (bench.py
--inductor-cache), which then report the first call with that cache warm.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="the .pt2 archive (torch.export.save)")
    p.add_argument("inputs", help="folder of inputs 0.npy, 1.npy, ... in graph order")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--runs", type=int, default=100, help="timed runs (at most, with --target-s)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs before timing")
    p.add_argument("--target-s", type=float, default=0.0,
                   help="if > 0, cut the runs so that timing takes about this long")
    p.add_argument("--min-runs", type=int, default=5, help="timed runs at least, with --target-s")
    p.add_argument("--mode", choices=["eager", "inductor"], required=True)
    p.add_argument("--expected", help="folder of expected outputs: report the max abs error")
    p.add_argument("--cache-dir", help="Inductor cache to use and keep (default: a fresh one, removed"
                                       " afterwards, so that compile_s is a cold compile)")
    p.add_argument("--compile-only", action="store_true",
                   help="only make the first call (fills --cache-dir) and report compile_s")
    return p.parse_args()


def main():
    args = parse_args()
    # Set before torch is imported: OpenMP reads these at start-up, and Inductor's generated C++
    # uses OpenMP too. A fresh Inductor cache makes compile_s a cold compile every time
    # (comparable with foundryc's cold compile) instead of a hit in /tmp/torchinductor_$USER.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    # A CPU benchmark: keep torch away from any GPU of the host (CUDA start-up in every process).
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if args.cache_dir:
        # Compiles run several processes at a time (bench.py --precompile-jobs) and the timing
        # runs hit the cache: no pool of compile workers to start in each process.
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    cache = args.cache_dir or tempfile.mkdtemp(prefix="foundry-bench-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    try:
        result = bench(args)
    finally:
        if not args.cache_dir:
            shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(result))


def load_npys(folder):
    import numpy as np
    files = sorted((f for f in os.listdir(folder) if f.endswith(".npy")),
                   key=lambda f: int(f[:-4]))
    return [np.load(os.path.join(folder, f)) for f in files]


def bench(args):
    import torch
    import torch.utils._pytree as pytree

    torch.set_num_threads(args.threads)
    inputs = [torch.from_numpy(a) for a in load_npys(args.inputs)]

    t0 = time.perf_counter()
    module = torch.export.load(args.model).module()
    load_s = time.perf_counter() - t0
    fn = torch.compile(module) if args.mode == "inductor" else module

    with torch.inference_mode():
        # The first call is where torch.compile traces and compiles.
        t0 = time.perf_counter()
        out = fn(*inputs)
        first_s = time.perf_counter() - t0
        if args.compile_only:
            return {"mode": args.mode, "threads": args.threads, "compile_s": first_s}
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            fn(*inputs)
        runs = args.runs
        if args.target_s > 0 and args.warmup > 0:
            per_run = (time.perf_counter() - t0) / args.warmup
            runs = max(args.min_runs, min(runs, int(args.target_s / max(per_run, 1e-9))))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - t0)

    times.sort()
    ms = lambda q: 1e3 * times[min(len(times) - 1, int(q * len(times)))]
    result = {
        "mode": args.mode,
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "runs": runs,
        "median_ms": 1e3 * statistics.median(times),
        "p10_ms": ms(0.1),
        "p90_ms": ms(0.9),
        "load_s": load_s,
    }
    if args.mode == "inductor":
        result["compile_s"] = first_s
    if args.expected:
        outs = [o.detach().numpy() for o in pytree.tree_leaves(out)]
        refs = load_npys(args.expected)
        if len(outs) != len(refs):
            result["max_abs_err"] = None
            result["check"] = f"{len(outs)} outputs, {len(refs)} expected"
        else:
            import numpy as np
            result["max_abs_err"] = max(
                (float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0)
                for o, r in zip(outs, refs))
    return result


if __name__ == "__main__":
    sys.exit(main())
