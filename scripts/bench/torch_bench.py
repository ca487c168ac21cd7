#!/usr/bin/env python3
"""Times exported models (.pt2) under PyTorch, eager or Inductor, at one thread count, in one process.

    torch_bench.py --threads T --mode eager|inductor|reduce-overhead [--device cuda] [--runs N ...] \\
        --model NAME MODEL.pt2 INPUTS_DIR [EXPECTED_DIR|-] [--model ...]

After each model it prints (and flushes) one JSON line, so that the lines of the models done
survive a timeout or a crash: {"model": NAME, "mode", "threads", "median_ms", "p10_ms", "p90_ms",
"runs", "load_s", ...}; for inductor also compile_s, the wall time of the first call, which is
when torch.compile compiles; with EXPECTED_DIR also max_abs_err. A model that raises gives
{"model": NAME, "error": "..."} and the next model follows. The first model of the process has
"first_in_process": true: its load_s and compile_s also hold PyTorch's one-time start-up (on a
16-core host Inductor's first compile takes tens of seconds more than later ones).

scripts/bench/bench.py runs one such process per (mode, thread count) over all its models: a
fresh process per thread count, because PyTorch's thread pools cannot be resized reliably once
they have started, and one for all models, because each process spends up to a minute starting.
Without --cache-dir the process uses a fresh Inductor cache, removed afterwards, so compile_s is a
cold compile of each model's graph (comparable with foundryc's cold compile); torch._dynamo.reset()
between models keeps one model's graphs from affecting the next. With --cache-dir and
--compile-only it fills a persistent Inductor cache ahead of the timing runs (bench.py
--inductor-cache), which then report the first call with that cache warm.
"""
import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", nargs="+", action="append", required=True,
                   metavar=("NAME", "MODEL.pt2 INPUTS_DIR [EXPECTED_DIR|-]"),
                   help="a model to time: its name (for the output), the .pt2 archive "
                        "(torch.export.save), its inputs 0.npy, 1.npy, ... in graph order and "
                        "optionally its expected outputs (report the max abs error); repeatable")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--runs", type=int, default=100, help="timed runs (at most, with --target-s)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs before timing")
    p.add_argument("--target-s", type=float, default=0.0,
                   help="if > 0, cut the runs so that timing takes about this long")
    p.add_argument("--min-runs", type=int, default=5, help="timed runs at least, with --target-s")
    p.add_argument("--mode", choices=["eager", "inductor", "reduce-overhead"], required=True,
                   help="eager, torch.compile (Inductor, default mode) or torch.compile(mode="
                        "\"reduce-overhead\") (CUDA graphs, with --device cuda)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the module and inputs on the GPU; each timed call is followed by"
                        " torch.cuda.synchronize()")
    p.add_argument("--cache-dir", help="Inductor cache to use and keep (default: a fresh one, removed"
                                       " afterwards, so that compile_s is a cold compile)")
    p.add_argument("--keep-cache", help="Inductor cache to use and keep, compiling as without --cache-dir"
                                        " (bench.py --torch-rounds: an empty one in the first round, whose"
                                        " compile_s is then cold, found again by the later rounds)")
    p.add_argument("--compile-only", action="store_true",
                   help="only make the first call (fills --cache-dir) and report compile_s")
    args = p.parse_args()
    for m in args.model:
        if len(m) not in (3, 4):
            p.error(f"--model {' '.join(m)}: want NAME MODEL.pt2 INPUTS_DIR [EXPECTED_DIR|-]")
        if len(m) == 3 or m[3] == "-":
            m[3:] = [None]
    return args


def main():
    args = parse_args()
    # Set before torch is imported: OpenMP reads these at start-up, and Inductor's generated C++
    # uses OpenMP too. A fresh Inductor cache makes compile_s a cold compile (comparable with
    # foundryc's cold compile) instead of a hit in /tmp/torchinductor_$USER.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.device == "cpu":
        # A CPU benchmark: keep torch away from any GPU of the host (CUDA start-up in every process).
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if args.cache_dir:
        # Compiles run several processes at a time (bench.py --precompile-jobs) and the timing
        # runs hit the cache: no pool of compile workers to start in each process.
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    cache = args.cache_dir or args.keep_cache or tempfile.mkdtemp(prefix="foundry-bench-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    try:
        import torch
        torch.set_num_threads(args.threads)
        for i, (name, model, inputs, expected) in enumerate(args.model):
            try:
                result = {"model": name, **bench(args, model, inputs, expected)}
            except Exception as e:  # this model's failure, not the others'
                traceback.print_exc()
                result = {"model": name, "error": f"{type(e).__name__}: {e}".strip()[:2000]}
            if i == 0:
                result["first_in_process"] = True
            print(json.dumps(result), flush=True)
            if args.mode != "eager":
                torch._dynamo.reset()
            gc.collect()  # pointwise_64m's inputs and outputs are 768 MiB
    finally:
        if not (args.cache_dir or args.keep_cache):
            shutil.rmtree(cache, ignore_errors=True)


def load_npys(folder):
    import numpy as np
    files = sorted((f for f in os.listdir(folder) if f.endswith(".npy")),
                   key=lambda f: int(f[:-4]))
    return [np.load(os.path.join(folder, f)) for f in files]


def tensor_of(torch, a):
    # bfloat16 arrays are 2-byte records ('<V2', ml_dtypes' bfloat16 as NumPy saves it): NumPy has
    # no bfloat16, so the bits go through int16.
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        return torch.from_numpy(a.view("<i2").copy()).view(torch.bfloat16)
    return torch.from_numpy(a)


def on_gpu(torch, module):
    """The exported module moved to the GPU: its parameters and buffers, its other tensor
    attributes (lifted constants), and the graph's ops that create tensors on the CPU (the export
    recorded device=cpu in their arguments)."""
    module = module.to("cuda")
    for name, value in list(vars(module).items()):
        if isinstance(value, torch.Tensor):
            setattr(module, name, value.to("cuda"))
    cpu = torch.device("cpu")
    for node in module.graph.nodes:
        if node.kwargs.get("device") in (cpu, "cpu"):
            node.kwargs = {**node.kwargs, "device": torch.device("cuda")}
    module.recompile()
    return module


def bench(args, model, inputs_dir, expected):
    import torch
    import torch.utils._pytree as pytree

    cuda = args.device == "cuda"
    inputs = [tensor_of(torch, a) for a in load_npys(inputs_dir)]
    if cuda:
        inputs = [t.to("cuda") for t in inputs]
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    t0 = time.perf_counter()
    module = torch.export.load(model).module()
    if cuda:
        module = on_gpu(torch, module)
    load_s = time.perf_counter() - t0
    if args.mode == "eager":
        fn = module
    else:
        fn = torch.compile(module, **({"mode": "reduce-overhead"} if args.mode == "reduce-overhead" else {}))

    with torch.inference_mode():
        # The first call is where torch.compile traces and compiles.
        t0 = time.perf_counter()
        out = fn(*inputs)
        sync()
        first_s = time.perf_counter() - t0
        if args.compile_only:
            return {"mode": args.mode, "threads": args.threads, "compile_s": first_s}
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            fn(*inputs)
        sync()
        runs = args.runs
        if args.target_s > 0 and args.warmup > 0:
            per_run = (time.perf_counter() - t0) / args.warmup
            runs = max(args.min_runs, min(runs, int(args.target_s / max(per_run, 1e-9))))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(*inputs)
            sync()
            times.append(time.perf_counter() - t0)
        # reduce-overhead's outputs live in its CUDA graph's memory, overwritten by the next call:
        # the checked output is the last call's, copied out now.
        out = pytree.tree_map(lambda o: o.detach().cpu() if isinstance(o, torch.Tensor) else o, fn(*inputs))

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
        "device": args.device,
    }
    if args.mode != "eager":
        result["compile_s"] = first_s
    if expected:
        outs = [o.detach().cpu().double().numpy() for o in pytree.tree_leaves(out)]
        refs = [tensor_of(torch, r).double().numpy() for r in load_npys(expected)]
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
