#!/usr/bin/env python3
"""foundryc benchmark: compile time, run time and roofline of the corpus models, against PyTorch.

Run through scripts/bench.sh, which finds a Python with torch for the baselines and passes it in
FOUNDRY_BENCH_TORCH_PYTHON (or the reason there is none in FOUNDRY_BENCH_NO_TORCH). This file
needs only the standard library (and NumPy for models without recorded inputs, pointwise_64m), so
it also runs under the system python3 when torch cannot be had.

For each model: foundryc compile time, cold (fresh --cache-dir) and cached (same cache again);
foundry-run's median at each thread count; bytes moved (manifest.json) / median = GB/s, as a
fraction of STREAM add's bandwidth at the same thread count; PyTorch eager and torch.compile
(Inductor) medians at the same thread counts (scripts/bench/torch_bench.py), measured after all
of foundry's figures, in one process per (mode, thread count) that times every model: a PyTorch
process spends up to a minute starting before its first Inductor call returns.
The markdown table goes to stdout, progress to stderr, everything to a JSON file.
"""
import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# Table order: small to large. Corpus models not listed here are appended in name order.
MODEL_ORDER = ["pointwise", "pointwise_64k", "mlp", "mlp_dynamic", "norm_softmax", "reductions",
               "encoder_layer", "small_cnn", "squeezenet1_1", "mobilenet_v3_small",
               "pointwise_64m"]
# Column names of PyTorch's modes (torch_bench.py --mode).
MODE_LABELS = {"eager": "eager", "inductor": "Inductor", "reduce-overhead": "reduce-overhead"}
# The model that is a pure bandwidth test; geometric means are also given without it.
BIG = "pointwise_64m"
# Models with no recorded inputs get random ones; their outputs are checked against these.
REFERENCES = {"pointwise_64m": lambda np, a, b: np.maximum(a + b, 0) * 2}
SEED = 20240601
FOUNDRYC_TIMEOUT_S = 900
RUN_TIMEOUT_S = 900
TORCH_TIMEOUT_S = 3600  # per model: a cold Inductor compile of a CNN on 2 cores takes minutes


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def die(msg):
    log(f"error: {msg}")
    sys.exit(1)


def parse_args():
    p = argparse.ArgumentParser(
        prog="scripts/bench.sh",
        description="Benchmark foundryc on the corpus models against PyTorch eager and Inductor.",
        epilog="Environment: BUILD_DIR (default build), FOUNDRYC, FOUNDRY_RUN, FOUNDRY_CORPUS "
               "(default ../shared/corpus), FOUNDRY_BENCH_PYTHON (a python with torch >= 2.9), "
               "FOUNDRY_BENCH_VENV (default ~/.cache/foundry/bench-venv), CC (for STREAM add).")
    p.add_argument("--models", help="comma-separated corpus models (default: all)")
    p.add_argument("--models-dir", type=Path,
                   help="benchmark the models of this folder instead of the corpus's: one folder per model"
                        " with model.pt2 and inputs/*.npy (expected/*.npy: checked too), e.g. scripts/zoo's")
    p.add_argument("--quick", action="store_true", help="fewer and shorter timing runs")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1,nproc)")
    p.add_argument("--out-dir", type=Path,
                   help="keep the compiled models in OUT_DIR/compiled/ (usable as --prebuilt) "
                        "and write the JSON there")
    p.add_argument("--json-out", type=Path,
                   help="JSON results (default: bench-results.json in --out-dir or here)")
    p.add_argument("--foundryc-args", default="",
                   help="extra foundryc arguments, one string, e.g. '--target=avx512'")
    p.add_argument("--compile-only", action="store_true",
                   help="only compile (into --out-dir/compiled/) and time the compiles")
    p.add_argument("--no-compile", action="store_true",
                   help="do not run foundryc; time the folders of --prebuilt")
    p.add_argument("--prebuilt", type=Path,
                   help="folder of compiled models, one foundryc output folder per model name")
    p.add_argument("--baseline", type=Path,
                   help="another foundryc (a build of an earlier commit): each model is also"
                        " compiled with it and timed right after this one's, in the same run;"
                        " the table gives baseline / foundryc (above 1: this build is faster)")
    p.add_argument("--rounds", type=int, default=1,
                   help="time each model this many times per thread count, the thread counts (and"
                        " with a baseline, this build and the baseline) alternating; each figure is"
                        " the median of its rounds' medians")
    p.add_argument("--torch-rounds", type=int, default=1,
                   help="time PyTorch this many times per mode and thread count, each time in a new"
                        " process; each figure is the median of the processes' medians. On a host whose"
                        " speed changes from process to process, one PyTorch process against foundryc's"
                        " median of --rounds is a lottery")
    p.add_argument("--rotate-cpus", action="store_true",
                   help="pin each round's timed one-thread foundry-run processes (and the baseline's)"
                        " to one CPU after their warm-up, the next CPU for the next round, not"
                        " whichever one the system gave each process (foundry-run --cpu; not with"
                        " more threads, whose pool would inherit the pin)")
    p.add_argument("--baseline-prebuilt", type=Path,
                   help="with --prebuilt: folder of the baseline's compiled models (as --baseline)")
    p.add_argument("--baseline-env", action="append", default=[], metavar="VAR=VALUE",
                   help="the baseline is this build's models run with VAR=VALUE in their environment"
                        " (repeatable), e.g. FOUNDRY_PARALLEL_PAYBACK=0: every step on the whole team")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: models compiled with --device cuda and timed on the GPU (foundry-run --bench:"
                        " NAME_run_cuda + stream synchronize), against PyTorch eager, torch.compile and"
                        " torch.compile(mode=\"reduce-overhead\") on the GPU, with a CUDA add kernel"
                        " (cuda_add.cu, built with nvcc) as the bandwidth roofline")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch baselines")
    p.add_argument("--no-inductor", action="store_true", help="skip torch.compile (slow to compile)")
    p.add_argument("--inductor-cache", type=Path,
                   help="a persistent Inductor cache (one folder per thread count inside), filled"
                        " by compiling every model first, --precompile-jobs at a time; the table"
                        " then gives Inductor's first call with that cache warm, not a cold compile."
                        " For a borrowed host where cold compiles one after another do not fit")
    p.add_argument("--precompile-jobs", type=int, default=4,
                   help="parallel Inductor compiles that fill --inductor-cache (default 4)")
    a = p.parse_args()
    if a.prebuilt:
        a.no_compile = True
    if a.no_compile and not a.prebuilt:
        p.error("--no-compile needs --prebuilt DIR (the compiled model folders)")
    if a.baseline_prebuilt and not a.no_compile:
        p.error("--baseline-prebuilt goes with --prebuilt (use --baseline FOUNDRYC to compile)")
    if a.baseline and a.no_compile:
        p.error("with --prebuilt, give the baseline's compiled models as --baseline-prebuilt DIR")
    if a.baseline_env and (a.baseline or a.baseline_prebuilt):
        p.error("--baseline-env is a baseline of its own: not with --baseline or --baseline-prebuilt")
    if any("=" not in kv for kv in a.baseline_env):
        p.error("--baseline-env takes VAR=VALUE")
    if a.compile_only and (a.no_compile or not a.out_dir):
        p.error("--compile-only needs --out-dir (where the compiled models are kept) and a compile")
    return a


def env_path(var, default):
    """A tool or folder from the environment (relative to the current dir), else the default
    (relative to the repository root, like the other scripts)."""
    value = os.environ.get(var)
    return Path(value).resolve() if value else (REPO / default).resolve()


def run(cmd, timeout, threads=None, extra_env=None, **kw):
    """Runs cmd, capturing its output. With threads, OMP_NUM_THREADS is set too: oneDNN and any
    OpenMP in the compiled model would otherwise use every core even at 1 thread."""
    env = dict(os.environ, **(extra_env or {}))
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [str(c) for c in cmd]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired:  # a failure of this one step, not of the whole benchmark
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {timeout} s")


def run_lines(cmd, timeout, threads, on_line):
    """Like run, but hands each line of stdout to on_line as it comes, so that what a long process
    printed survives its timeout (or this script's). Killing the process ends its stdout: Inductor's
    compile workers write elsewhere and exit when their parent does."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [str(c) for c in cmd]
    timed_out = []

    def kill():
        timed_out.append(True)
        proc.kill()

    with tempfile.TemporaryFile("w+", errors="replace") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, errors="replace",
                                env=env)
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            for line in proc.stdout:
                on_line(line)
        except BaseException:
            proc.kill()
            raise
        finally:
            timer.cancel()
            proc.wait()
        err.seek(0)
        stderr = err.read() + (f"\ntimed out after {timeout} s" if timed_out else "")
    return subprocess.CompletedProcess(cmd, 124 if timed_out else proc.returncode, "", stderr)


def last_json(text):
    """The JSON object on the last line of text that parses as one (tools print warnings too)."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    return None


def failure(proc, what):
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
    return f"{what} failed (exit {proc.returncode}): " + " | ".join(tail)


# ---------------------------------------------------------------------------------------------
# Machine and bandwidth

def machine_info():
    cpu = "unknown"
    try:
        for line in run(["lscpu"], 30).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
                break
    except (OSError, subprocess.SubprocessError):
        pass
    info = {"cpu": cpu, "nproc": len(os.sched_getaffinity(0)), "kernel": os.uname().release,
            "loadavg_at_start": round(os.getloadavg()[0], 2)}
    try:
        smi = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], 60)
        if smi.returncode == 0 and smi.stdout.strip():
            info["gpu"] = smi.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def stream_add(work, threads):
    """STREAM add GB/s per thread count, from scripts/bench/stream_add.c."""
    cc = os.environ.get("CC", "cc")
    exe = work / "stream_add"
    proc = run([cc, "-O3", "-march=native", "-fopenmp", HERE / "stream_add.c", "-o", exe], 300)
    if proc.returncode != 0:
        die(failure(proc, f"compiling stream_add.c with {cc}"))
    result = {}
    for t in threads:
        proc = run([exe], 600, threads=t)
        data = last_json(proc.stdout)
        if proc.returncode != 0 or not data:
            die(failure(proc, "stream_add"))
        result[t] = data["gbps"]
        log(f"STREAM add, {plural_threads(t)}: {data['gbps']:.1f} GB/s")
    return result


def cuda_add(work, threads):
    """The GPU's add bandwidth (GB/s), from scripts/bench/cuda_add.cu built with nvcc; the same
    figure for every thread count (the host's threads do not matter there)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    exe = work / "cuda_add"
    proc = run([nvcc, "-O3", "-arch=sm_90", HERE / "cuda_add.cu", "-o", exe], 300)
    if proc.returncode != 0:
        die(failure(proc, f"compiling cuda_add.cu with {nvcc}"))
    proc = run([exe], 300)
    data = last_json(proc.stdout)
    if proc.returncode != 0 or not data:
        die(failure(proc, "cuda_add"))
    log(f"CUDA add on {data['device']}: {data['gbps']:.1f} GB/s")
    return {t: data["gbps"] for t in threads}


# ---------------------------------------------------------------------------------------------
# One model

def random_inputs(model_dir, dest):
    """Seeded random float32 inputs with the shapes of meta.json, for models without inputs/."""
    import numpy as np  # only here: the rest runs without NumPy
    meta = json.loads((model_dir / "meta.json").read_text())
    rng = np.random.default_rng(SEED)
    dest.mkdir(parents=True)
    for i, (shape, dtype) in enumerate(meta["inputs"]):
        if dtype != "torch.float32":
            raise ValueError(f"cannot make random inputs of {dtype}")
        np.save(dest / f"{i}.npy", rng.standard_normal(shape, dtype=np.float32))
    return dest


def model_inputs(ctx, name):
    """(inputs, expected or None) of a corpus model. Random inputs are made once and kept in
    ctx.work (512 MiB for pointwise_64m): PyTorch must time the same ones as foundry-run."""
    src = ctx.models_dir / name
    inputs, expected = src / "inputs", src / "expected"
    if not inputs.is_dir():
        inputs = ctx.work / f"inputs-{name}"
        if not inputs.is_dir():
            random_inputs(src, inputs)
    return inputs, expected if expected.is_dir() else None


def check_reference(name, inputs, outputs):
    """Compares foundry-run's saved outputs with NumPy's result of the same graph."""
    import numpy as np
    args = [np.load(inputs / f"{i}.npy") for i in range(len(list(inputs.glob("*.npy"))))]
    want = REFERENCES[name](np, *args)
    got = np.load(outputs / "0.npy")
    ok = got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-6, atol=1e-6))
    return {"pass": ok, "max_abs_err": float(np.max(np.abs(got - want))) if ok else None,
            "against": "numpy"}


def time_compile(cmd):
    t0 = time.perf_counter()
    proc = run(cmd, FOUNDRYC_TIMEOUT_S)
    return time.perf_counter() - t0, proc


def compile_model(ctx, name, src, out, foundryc):
    """foundryc cold (a fresh, empty cache) then cached (same cache, another output folder)."""
    rec = {}
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=ctx.work))
    second = ctx.work / f"cached-{name}"
    base = [foundryc, src / "model.pt2", "--cache-dir", cache, *ctx.foundryc_args]
    if out.exists():
        shutil.rmtree(out)
    for key, dest in (("compile_cold_s", out), ("compile_cached_s", second)):
        secs, proc = time_compile(base + ["-o", dest])
        if proc.returncode != 0:
            rec["error"] = failure(proc, "foundryc")
            break
        rec[key] = secs
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(second, ignore_errors=True)
    return rec


def foundry_run(ctx, out, inputs, threads, extra=(), runs=3, warmup=1, env=None):
    proc = run([ctx.foundry_run, out, "--inputs", inputs, "--bench", runs, "--warmup", warmup,
                "--threads", threads, "--json", *extra], RUN_TIMEOUT_S, threads=threads, extra_env=env)
    data = last_json(proc.stdout)
    if data is None or "median_ms" not in data:
        return {"error": failure(proc, "foundry-run")}
    return data


def next_round_cpu(ctx):
    """--rotate-cpus: the CPU of the next round's timed runs (each round of the benchmark the next
    CPU this process may use); None without."""
    if not ctx.args.rotate_cpus:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    ctx.rounds_started = getattr(ctx, "rounds_started", 0) + 1
    return cpus[(ctx.rounds_started - 1) % len(cpus)]


def time_foundry(ctx, name, out, inputs, expected, threads, first, env=None, cpu=None):
    """A short run to check the outputs and size the timing, then the timed run (`env`: more
    environment variables for foundry-run; `cpu`: the CPU of its calling thread after the warm-up)."""
    extra = ["--expected", expected] if expected else []
    saved = None
    if first and name in REFERENCES:
        saved = ctx.work / f"outputs-{name}"
        extra += ["--save-outputs", saved]
    probe = foundry_run(ctx, out, inputs, threads, extra, env=env)
    if "error" in probe:
        return probe, None
    check = None
    if expected:
        check = {"pass": bool(probe.get("pass")), "against": "expected/"}
    elif saved:
        check = check_reference(name, inputs, saved)
        shutil.rmtree(saved, ignore_errors=True)
    runs = ctx.runs_for(probe["median_ms"] / 1e3)
    # Only a one-thread run is pinned: threads that libgomp starts after the pin would inherit it.
    cpu = cpu if threads == 1 else None
    res = foundry_run(ctx, out, inputs, threads, ["--cpu", cpu] if cpu is not None else [], runs=runs,
                      warmup=ctx.warmup, env=env)
    if cpu is not None:
        res["cpu"] = cpu
    res.pop("outputs", None)
    res.pop("pass", None)
    return res, check


def inductor_cache(ctx, threads):
    """Per thread count: Inductor's generated code depends on it (OpenMP num_threads)."""
    return ctx.args.inductor_cache.resolve() / f"threads-{threads}"


def time_torch(ctx, names, threads, mode, on_result, compile_only=False):
    """Times the models in torch_bench.py processes, one for all of them unless one crashes (the
    rest then go on in a new process). on_result(name, result) gets each model's figures or error
    as they come."""
    todo = list(names)
    while todo:
        cmd = [ctx.torch_python, HERE / "torch_bench.py", "--threads", threads, "--mode", mode,
               "--runs", ctx.max_runs, "--warmup", ctx.warmup, "--target-s", ctx.target_s,
               "--min-runs", ctx.min_runs, "--device", ctx.args.device]
        if mode == "inductor" and ctx.args.inductor_cache:
            cmd += ["--cache-dir", inductor_cache(ctx, threads)]
        elif mode == "inductor" and ctx.args.torch_rounds > 1:
            # Round 1 compiles cold into an empty cache; later rounds find it (they time runs, and
            # their compile_s is not reported).
            cmd += ["--keep-cache", ctx.work / f"inductor-rounds-{threads}-{ctx.args.device}"]
        if compile_only:
            cmd += ["--compile-only"]
        for n in todo:
            inputs, expected = model_inputs(ctx, n)
            cmd += ["--model", n, ctx.models_dir / n / "model.pt2", inputs,
                    "-" if compile_only or not expected else expected]

        def on_line(line):
            data = last_json(line)
            if data and data.get("model") in todo:
                todo.remove(data["model"])
                on_result(data.pop("model"), data)

        proc = run_lines(cmd, TORCH_TIMEOUT_S * len(todo), threads, on_line)
        if not todo:
            break
        # Lines come in order: the process died (or hung) in the first model without one.
        on_result(todo.pop(0), {"error": failure(proc, f"torch {mode}")})
        if proc.returncode == 124:  # the time is spent: no new process for the rest
            for n in todo:
                on_result(n, {"error": f"torch {mode}: not reached, the process timed out"})
            break


def compiled_folder(ctx, rec, name, prebuilt, foundryc, compiled, key=""):
    """The model's compiled folder: prebuilt, or compiled now with `foundryc` (timings and errors
    into rec under key + the usual names); None on error."""
    if prebuilt:
        out = prebuilt / name
        if not (out / "model.so").is_file() or not (out / "manifest.json").is_file():
            rec[key + "error"] = f"{out} is not a foundryc output folder (no model.so, manifest.json)"
            return None
        return out
    out = compiled / name
    log(f"{name}: {key or ''}foundryc")
    rec.update({key + k: v for k, v in compile_model(ctx, name, ctx.models_dir / name, out, foundryc).items()})
    return None if key + "error" in rec else out


def first_baseline(ctx, rec, row, name, base, inputs, expected, t, cpu):
    """The baseline's models timed right after this build's at the same thread count (checked
    against the expected outputs too)."""
    log(f"{name}: baseline foundry-run, {plural_threads(t)}")
    base_res, base_check = time_foundry(ctx, name, base, inputs, expected, t, first=False, env=baseline_env(ctx),
                                        cpu=cpu)
    if base_check is not None and not base_check["pass"]:
        rec["baseline_check"] = base_check
    row["baseline"] = base_res


def baseline_env(ctx):
    return dict(kv.split("=", 1) for kv in ctx.args.baseline_env)


def more_rounds(ctx, rec, out, base, inputs):
    """--rounds N: N-1 more timings of each thread count, the thread counts alternating (1, 16, 1,
    16...) and, with a baseline, this build and the baseline alternating within each, so that a
    slow moment of the machine, or a slow placement of one process, does not decide which is
    faster. Each figure becomes the median of its rounds' medians (foundry's round_medians_ms; the
    baseline's rounds in `rounds`, with baseline_ratio of the two medians)."""
    rows = {t: row for t, row in rec["threads"].items() if "median_ms" in row["foundry"]}
    mine = {t: [row["foundry"]["median_ms"]] for t, row in rows.items()}
    theirs = {t: [row["baseline"]["median_ms"]] for t, row in rows.items()
              if base is not None and "median_ms" in row.get("baseline", {})}
    cpus = [next(iter(rows.values()))["foundry"].get("cpu")] if rows else []
    for _ in range(ctx.args.rounds - 1):
        cpu = next_round_cpu(ctx)
        cpus.append(cpu)
        for t in rows:
            log(f"{rec['model']}: foundry-run, {plural_threads(t)}, another round")
            res = time_foundry(ctx, rec["model"], out, inputs, None, t, first=False, cpu=cpu)[0]
            if "median_ms" in res:
                mine[t].append(res["median_ms"])
            if t in theirs:
                res = time_foundry(ctx, rec["model"], base, inputs, None, t, first=False, env=baseline_env(ctx),
                                   cpu=cpu)[0]
                if "median_ms" in res:
                    theirs[t].append(res["median_ms"])
    for t, row in rows.items():
        row["foundry"].update(round_medians_ms=mine[t], median_ms=statistics.median(mine[t]))
        if ctx.args.rotate_cpus and t == 1:
            row["foundry"]["round_cpus"] = cpus
        if t in theirs:
            row["rounds"] = {"foundry_ms": mine[t], "baseline_ms": theirs[t]}
            row["baseline_ratio"] = statistics.median(theirs[t]) / statistics.median(mine[t])


def bench_model(ctx, name):
    rec = {"model": name}
    out = compiled_folder(ctx, rec, name, ctx.args.prebuilt, ctx.foundryc, ctx.compiled)
    base = out if ctx.args.baseline_env else None
    if ctx.args.baseline or ctx.args.baseline_prebuilt:
        base = compiled_folder(ctx, rec, name, ctx.args.baseline_prebuilt, ctx.args.baseline,
                               ctx.compiled / "baseline", "baseline_")
    if out is None or ctx.args.compile_only:
        return rec
    manifest = json.loads((out / "manifest.json").read_text())
    rec["bytes_moved"] = manifest.get("bytes_moved")
    rec["foundryc_version"] = manifest.get("foundryc_version")

    try:
        inputs, expected = model_inputs(ctx, name)
    except (ImportError, ValueError, KeyError) as e:
        rec["error"] = f"no inputs/ and cannot generate them: {e}"
        return rec

    rec["threads"] = {}
    cpu = next_round_cpu(ctx)
    for i, t in enumerate(ctx.threads):
        log(f"{name}: foundry-run, {plural_threads(t)}")
        res, check = time_foundry(ctx, name, out, inputs, expected, t, first=i == 0, cpu=cpu)
        if check is not None:
            rec.setdefault("check", check)
            if not check["pass"]:
                rec["check"] = check
        row = {"foundry": res}
        if base is not None:
            first_baseline(ctx, rec, row, name, base, inputs, expected, t, cpu)
        rec["threads"][t] = row
    if ctx.args.rounds > 1 or base is not None:
        more_rounds(ctx, rec, out, base, inputs)
    for t, row in rec["threads"].items():
        res = row["foundry"]
        if "median_ms" in res and rec["bytes_moved"]:
            row["gbps"] = rec["bytes_moved"] / (res["median_ms"] * 1e-3) / 1e9
            row["roofline"] = row["gbps"] / ctx.stream[t]
            if "min_ms" in res:  # best run against STREAM's best of 10: the same statistic
                row["roofline_best"] = rec["bytes_moved"] / (res["min_ms"] * 1e-3) / 1e9 / ctx.stream[t]
    if inputs.parent == ctx.work and not ctx.torch_modes:
        shutil.rmtree(inputs, ignore_errors=True)  # 512 MiB for pointwise_64m; else kept for torch
    return rec


def torch_phase(ctx, models, threads, mode, save, round_no=1):
    """PyTorch's figures for every model that foundry-run timed, in row[mode] and, beside
    foundry's median, row[f"{mode}_ratio"]; save() after each model. A later round (round_no > 1)
    adds its median to row[mode]["round_medians_ms"], and the figure becomes their median."""
    recs = {r["model"]: r for r in models if "threads" in r}
    if not recs:
        return
    log(f"torch {mode}, {plural_threads(threads)}: {len(recs)} models in one process"
        + (f", round {round_no}" if ctx.args.torch_rounds > 1 else ""))

    def on_result(name, data):
        row = recs[name]["threads"][threads]
        before = row.get(mode, {}) if round_no > 1 else {}
        earlier = before.get("round_medians_ms", [])
        if "median_ms" in data:
            data["round_medians_ms"] = earlier + [data["median_ms"]]
            data["median_ms"] = statistics.median(data["round_medians_ms"])
            if "compile_s" in before:  # the first round's first call: later ones find Inductor's cache
                data["compile_s"] = before["compile_s"]
        elif earlier:  # a failed round keeps the earlier rounds' figure, and says why
            log(f"{name}: torch {mode}, round {round_no}: {data.get('error')}; the earlier rounds' figure stays")
            return
        row[mode] = data
        if "error" in data:
            log(f"{name}: {data['error']}")
        else:
            log(f"{name}: torch {mode}, {plural_threads(threads)}: {fmt_time(data['median_ms'])}"
                + (f", first call {data['compile_s']:.1f} s" if "compile_s" in data else ""))
            if "median_ms" in row["foundry"]:
                row[f"{mode}_ratio"] = data["median_ms"] / row["foundry"]["median_ms"]
        save()

    time_torch(ctx, list(recs), threads, mode, on_result)


def precompile_inductor(ctx, names):
    """Fills --inductor-cache: every (model, thread count) compiled once, --precompile-jobs
    processes at a time, each over a share of the models at one thread count (a process takes
    up to a minute to start; the timing runs come afterwards on an otherwise idle machine)."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = max(1, ctx.args.precompile_jobs)
    done = {}
    for n in names:
        try:
            model_inputs(ctx, n)  # made once, here, not by several threads at once
        except (ImportError, ValueError, KeyError) as e:
            done.update({f"{n}/{t}": {"error": f"no inputs: {e}"} for t in ctx.threads})
    ok = [n for n in names if f"{n}/{ctx.threads[0]}" not in done]
    shares = max(1, min(len(ok), jobs // len(ctx.threads)))
    work = [(ok[k::shares], t) for t in ctx.threads for k in range(shares) if ok[k::shares]]
    log(f"Inductor: compiling {len(ok) * len(ctx.threads)} (model, thread count) pairs into"
        f" {ctx.args.inductor_cache}, {len(work)} processes, {jobs} at a time")

    def one(job):
        share, t = job

        def on_result(name, res):
            done[f"{name}/{t}"] = res
            log(f"{name}, {plural_threads(t)}: Inductor cache filled"
                + (f" ({res['compile_s']:.1f} s)" if "compile_s" in res else f": {res.get('error')}"))

        time_torch(ctx, share, t, "inductor", on_result, compile_only=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, work))
    log(f"Inductor: cache filled in {time.perf_counter() - t0:.0f} s")
    return {f"{n}/{t}": done.get(f"{n}/{t}") for n in names for t in ctx.threads}


# ---------------------------------------------------------------------------------------------
# Summary and report

def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(ctx, models):
    summary = {}
    for t in ctx.threads:
        s = {}
        for mode in ctx.torch_modes:
            pairs = [(m["model"], m["threads"][t][f"{mode}_ratio"]) for m in models
                     if f"{mode}_ratio" in m.get("threads", {}).get(t, {})]
            s[mode] = {"geomean": geomean([r for _, r in pairs]), "models": len(pairs),
                       f"geomean_without_{BIG}": geomean([r for n, r in pairs if n != BIG]),
                       f"models_without_{BIG}": sum(n != BIG for n, _ in pairs)}
        ratios = [m["threads"][t]["baseline_ratio"] for m in models
                  if "baseline_ratio" in m.get("threads", {}).get(t, {})]
        if ratios:
            s["baseline"] = {"geomean": geomean(ratios), "models": len(ratios)}
        summary[t] = s
    return summary


def fmt_time(ms):
    if ms is None:
        return "—"
    s = ms / 1e3
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            return f"{s / scale:.3g} {unit}"


def fmt(x, spec, suffix=""):
    return "—" if x is None else f"{x:{spec}}{suffix}"


def report(ctx, result):
    m, torch = result["machine"], result["torch"]
    lines = ["# foundryc benchmark", "",
             f"- machine: {m['cpu']}, nproc {m['nproc']}, Linux {m['kernel']}, load average "
             f"{m['loadavg_at_start']} at start" + (f"; GPU {m['gpu']}" if m.get("gpu") else ""),
             f"- {result['foundryc_version']}" + (" (prebuilt)" if ctx.args.no_compile else ""),
             f"- PyTorch: {torch.get('version') or 'none: ' + torch['missing']}"]
    if not ctx.args.compile_only:
        lines += [f"- {ctx.roofline_name} add (12 B/element, best of 10): " + ", ".join(
                      f"{plural_threads(t)} {g:.1f} GB/s" for t, g in result["stream_add_gbps"].items()),
                  f"- {ctx.mode_note}"]
    lines.append("")
    models = result["models"]
    if not ctx.args.no_compile:
        head = ["model", "foundryc cold", "foundryc cached"]
        if "inductor" in ctx.torch_modes:  # torch.compile compiles on the first call
            warm = " (warm cache)" if ctx.args.inductor_cache else ""
            head += [f"Inductor first call{warm}, {plural_threads(t)}" for t in ctx.threads]
        lines += ["## Compile time", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for r in models:
            cells = [r["model"], fmt(r.get("compile_cold_s"), ".2f", " s"),
                     fmt(r.get("compile_cached_s"), ".2f", " s")]
            if "inductor" in ctx.torch_modes:
                cells += [fmt(r.get("threads", {}).get(t, {}).get("inductor", {}).get("compile_s"),
                              ".1f", " s") for t in ctx.threads]
            lines.append("| " + " | ".join(cells) + " |")
        first = next((r["model"] for r in models if r.get("threads") and any(
            row.get("inductor", {}).get("first_in_process") for row in r["threads"].values())), None)
        if first:  # one PyTorch process per thread count times every model, in table order
            lines += ["", f"Inductor's first call for {first} also holds PyTorch's one-time start-up"
                          " in its process."]
        lines.append("")
    if not ctx.args.compile_only:
        for t in ctx.threads:
            modes = ctx.torch_modes or ["eager", "inductor"]
            where = "on the GPU" if ctx.args.device == "cuda" else plural_threads(t)
            head = ["model", "foundryc", "GB/s", f"of {ctx.roofline_name}", f"best run, of {ctx.roofline_name}"]
            head += [MODE_LABELS[m] for m in modes] + [f"{MODE_LABELS[m]} / foundryc" for m in modes] + ["check"]
            lines += [f"## Run time, {where} (medians)", "", "| " + " | ".join(head) + " |",
                      "|---" * len(head) + "|"]
            for r in models:
                row = r.get("threads", {}).get(t, {})
                cells = [r["model"], fmt_time(row.get("foundry", {}).get("median_ms")),
                         fmt(row.get("gbps"), ".2f"), fmt(row.get("roofline") and
                                                          100 * row["roofline"], ".0f", "%"),
                         fmt(row.get("roofline_best") and 100 * row["roofline_best"], ".0f", "%")]
                cells += [fmt_time(row.get(m, {}).get("median_ms")) for m in modes]
                cells += [fmt(row.get(f"{m}_ratio"), ".2f", "×") for m in modes] + [check_cell(r)]
                lines.append("| " + " | ".join(cells) + " |")
            g = result["geomean"][t]
            for label, key, count in (("geomean", "geomean", "models"),
                                      (f"geomean without {BIG}", f"geomean_without_{BIG}",
                                       f"models_without_{BIG}")):
                if ctx.torch_modes:
                    n = next((g[m][count] for m in modes if m in g), None)
                    lines.append(f"| **{label}** (n={n}) |" + " |" * (4 + len(modes)) + " "
                                 + " | ".join(fmt(g.get(m, {}).get(key), ".2f", "×") for m in modes) + " | |")
            lines.append("")
        if len(ctx.threads) > 1 and ctx.args.device == "cpu":
            lines += scaling_table(ctx, result)
        if ctx.args.baseline or ctx.args.baseline_prebuilt or ctx.args.baseline_env:
            lines += baseline_table(ctx, result)
        lines += ["Ratios above 1 mean foundryc is faster. GB/s = manifest bytes_moved / median;"
                  " models whose data fit in cache can pass 100% of STREAM (a DRAM figure). \"best run\""
                  " uses foundryc's fastest run, the statistic STREAM reports (best of 10).", ""]
    errors = [f"- {r['model']}: {e}" for r in models for e in errors_of(r)]
    if errors:
        lines += ["## Errors", ""] + errors + [""]
    return "\n".join(lines)


def scaling_table(ctx, result):
    """Each model's time at every thread count against its time at the first (above 1: faster
    with more threads). With rounds, each time is followed by its rounds' range: on a host whose
    processes run at one of a few speed levels for their life, a ratio off by more than the
    noise asked of it may be the levels', which the ranges show. The paired column compares each
    round's two counts, timed one right after the other, and takes the median of those ratios:
    a slow spell of the host then slows both sides of a pair, not one side's median."""
    first, rest = ctx.threads[0], ctx.threads[1:]
    rounds = (f", median of {ctx.args.rounds} rounds alternating the thread counts (the rounds' range)"
              if ctx.args.rounds > 1 else "")
    head = ["model", f"foundryc {plural_threads(first)}"]
    for t in rest:
        head += [f"foundryc {plural_threads(t)}", f"{first}T / {t}T"]
        if ctx.args.rounds > 1:
            head += [f"{first}T / {t}T paired (range)"]
    lines = [f"## foundryc's thread scaling{rounds}", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in result["models"]:
        timed = {t: r.get("threads", {}).get(t, {}).get("foundry", {}) for t in ctx.threads}
        ms = {t: timed[t].get("median_ms") for t in ctx.threads}
        cells = [r["model"], time_with_range(timed[first])]
        for t in rest:
            cells += [time_with_range(timed[t]), fmt(ms[first] / ms[t] if ms[first] and ms[t] else None, ".2f", "×")]
            if ctx.args.rounds > 1:
                cells += [paired_ratio(timed[first], timed[t], ctx.args.rounds)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def paired_ratio(a, b, rounds):
    """The median of a's round medians over b's, round by round, and their range ("-" unless both
    have all `rounds`: a failed round leaves them unpaired)."""
    ra, rb = a.get("round_medians_ms") or [], b.get("round_medians_ms") or []
    if len(ra) != rounds or len(rb) != rounds:
        return "-"
    ratios = [x / y for x, y in zip(ra, rb)]
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f} – {max(ratios):.2f})"


def time_with_range(timed):
    """A median time, and the range of its rounds' medians when there were several."""
    rounds = timed.get("round_medians_ms") or []
    spread = f" ({fmt_time(min(rounds))} – {fmt_time(max(rounds))})" if len(rounds) > 1 else ""
    return fmt_time(timed.get("median_ms")) + spread


def baseline_table(ctx, result):
    """This build against the baseline's models, timed one after the other in this run."""
    head = ["model"]
    for t in ctx.threads:
        head += [f"foundryc {plural_threads(t)}", f"baseline {plural_threads(t)}", f"baseline / foundryc {t}T"]
    lines = [f"## Against the baseline ({ctx.args.baseline or ctx.args.baseline_prebuilt or ' '.join(ctx.args.baseline_env)}), median of"
             f" {ctx.args.rounds} alternating round(s)", "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in result["models"]:
        cells = [r["model"]]
        for t in ctx.threads:
            row = r.get("threads", {}).get(t, {})
            rounds = row.get("rounds")
            mine = statistics.median(rounds["foundry_ms"]) if rounds else row.get("foundry", {}).get("median_ms")
            theirs = statistics.median(rounds["baseline_ms"]) if rounds else row.get("baseline", {}).get("median_ms")
            cells += [fmt_time(mine), fmt_time(theirs), fmt(row.get("baseline_ratio"), ".3f", "×")]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**geomean**"]
    for t in ctx.threads:
        cells += ["", "", fmt(result["geomean"][t].get("baseline", {}).get("geomean"), ".3f", "×")]
    return lines + ["| " + " | ".join(cells) + " |", ""]


def plural_threads(t):
    return f"{t} thread" + ("s" if t != 1 else "")


def check_cell(r):
    c = r.get("check")
    if c is None:
        return "—"
    return ("pass" if c["pass"] else "**FAIL**") + (" (numpy)" if c["against"] == "numpy" else "")


def errors_of(r):
    if "error" in r:
        yield r["error"]
    if "baseline_error" in r:
        yield f"baseline: {r['baseline_error']}"
    if r.get("baseline_check", {}).get("pass") is False:
        yield "baseline: outputs do not match"
    for t, row in r.get("threads", {}).items():
        for key, val in row.items():
            if isinstance(val, dict) and "error" in val:
                yield f"{key}, {plural_threads(t)}: {val['error']}"


# ---------------------------------------------------------------------------------------------

class Ctx:
    pass


def main():
    args = parse_args()
    ctx = Ctx()
    ctx.args = args
    ctx.foundryc_args = shlex.split(args.foundryc_args)
    build = os.environ.get("BUILD_DIR", "build")
    ctx.foundryc = env_path("FOUNDRYC", f"{build}/foundryc")
    ctx.foundry_run = env_path("FOUNDRY_RUN", f"{build}/foundry-run")
    ctx.corpus = env_path("FOUNDRY_CORPUS", "../shared/corpus")
    machine = machine_info()
    if machine["loadavg_at_start"] > 0.5:  # other work on the machine skews the timings
        log(f"warning: load average {machine['loadavg_at_start']}: timings will be noisy")
    ctx.threads = ([int(t) for t in args.threads.split(",")] if args.threads
                   else [1] if args.device == "cuda" else sorted({1, machine["nproc"]}))
    if args.device == "cuda" and "--device" not in ctx.foundryc_args:
        ctx.foundryc_args += ["--device", "cuda"]
    ctx.roofline_name = "CUDA" if args.device == "cuda" else "STREAM"
    # Timing budget per measurement: runs are cut so each takes about target_s.
    ctx.target_s, ctx.warmup, ctx.min_runs, ctx.max_runs = (
        (0.3, 3, 5, 1000) if args.quick else (2.0, 10, 10, 10000))
    ctx.runs_for = lambda per_run_s: max(ctx.min_runs, min(ctx.max_runs,
                                                           int(ctx.target_s / max(per_run_s, 1e-9))))
    ctx.mode_note = (f"{'quick: ' if args.quick else ''}each median over about {ctx.target_s} s of"
                     f" runs ({ctx.min_runs}..{ctx.max_runs}) after {ctx.warmup} warm-up runs"
                     + (f", foundryc's the median of {args.rounds} rounds' medians" if args.rounds > 1 else "")
                     + (", each round's timed runs on one CPU, the next CPU each round" if args.rotate_cpus else "")
                     + ";"
                     + (f" PyTorch the median of {args.torch_rounds} processes' medians per mode and thread count,"
                        " each for all models," if args.torch_rounds > 1 else
                        " PyTorch in one process per mode and thread count for all models,")
                     + " Inductor with "
                     + ("a cache filled beforehand" if args.inductor_cache else "an empty cache"))

    ctx.models_dir = (args.models_dir or ctx.corpus / "models").resolve()
    if not ctx.models_dir.is_dir():
        die(f"no models in {ctx.models_dir} (set FOUNDRY_CORPUS, or give --models-dir)")
    available = [d.name for d in ctx.models_dir.iterdir() if (d / "model.pt2").is_file()]
    order = MODEL_ORDER + sorted(set(available) - set(MODEL_ORDER))
    if args.models:
        names = args.models.split(",")
        unknown = [n for n in names if n not in available]
        if unknown:
            die(f"not in {ctx.models_dir}: {', '.join(unknown)}")
    else:
        names = [n for n in order if n in available]
    if args.no_compile:
        if not args.models:  # the prebuilt folder decides which models there are
            names = [n for n in names if (args.prebuilt / n).is_dir()]
        if not names:
            die(f"no compiled model folders named after the models of {ctx.models_dir} in {args.prebuilt}")
    else:
        for tool in (ctx.foundryc,) if args.compile_only else (ctx.foundryc, ctx.foundry_run):
            if not os.access(tool, os.X_OK):
                die(f"{tool} not found: build first (scripts/setup.sh) or set FOUNDRYC/FOUNDRY_RUN")
    if args.no_compile and not os.access(ctx.foundry_run, os.X_OK):
        die(f"{ctx.foundry_run} not found: set FOUNDRY_RUN to the foundry-run binary")

    torch_info = {}
    ctx.torch_python = os.environ.get("FOUNDRY_BENCH_TORCH_PYTHON")
    ctx.torch_modes = []
    if args.compile_only or args.no_torch:
        torch_info["missing"] = "not asked for (--no-torch or --compile-only)"
    elif not ctx.torch_python:
        torch_info["missing"] = os.environ.get("FOUNDRY_BENCH_NO_TORCH", "no python with torch")
        log(f"PyTorch columns will be empty: {torch_info['missing']}")
    else:
        torch_info["python"] = ctx.torch_python
        torch_info["version"] = run([ctx.torch_python, "-c", "import torch; print(torch.__version__)"],
                                    300).stdout.strip()
        ctx.torch_modes = ["eager"] if args.no_inductor else ["eager", "inductor"]
        if args.device == "cuda" and not args.no_inductor:
            ctx.torch_modes.append("reduce-overhead")

    out_dir = args.out_dir.resolve() if args.out_dir else None
    json_out = args.json_out or ((out_dir or Path.cwd()) / "bench-results.json")
    ctx.work = Path(tempfile.mkdtemp(prefix="foundry-bench-"))
    try:
        if out_dir:
            ctx.compiled = out_dir / "compiled"
            ctx.compiled.mkdir(parents=True, exist_ok=True)
        else:
            ctx.compiled = ctx.work / "compiled"
        if args.no_compile:
            version = None
        else:
            version = run([ctx.foundryc, "--version"], 60).stdout.strip()
        roofline = cuda_add if args.device == "cuda" else stream_add
        ctx.stream = {} if args.compile_only else roofline(ctx.work, ctx.threads)
        precompiled = None
        if args.inductor_cache and "inductor" in ctx.torch_modes:
            precompiled = precompile_inductor(ctx, names)
        models = []
        json_out.parent.mkdir(parents=True, exist_ok=True)
        partial = json_out.with_name(json_out.stem + ".partial.json")

        def save_partial():
            # Figures are kept as they come, so that a run cut short (a time limit on a borrowed
            # host) still leaves what it measured.
            partial.write_text(json.dumps({"stream_add_gbps": ctx.stream, "models": models},
                                          indent=1) + "\n")

        for n in names:
            models.append(bench_model(ctx, n))
            save_partial()
        # PyTorch after foundry: one process per (round, thread count, mode) for all models.
        for r in range(1, args.torch_rounds + 1):
            for t in ctx.threads:
                for mode in ctx.torch_modes:
                    torch_phase(ctx, models, t, mode, save_partial, r)
        if args.no_compile:
            version = next((m["foundryc_version"] for m in models if m.get("foundryc_version")),
                           "unknown")
            version = f"foundryc {version}"
        result = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine,
            "foundryc_version": version,
            "foundryc": None if args.no_compile else str(ctx.foundryc),
            "foundryc_args": ctx.foundryc_args,
            "foundry_run": str(ctx.foundry_run),
            "prebuilt": str(args.prebuilt) if args.prebuilt else None,
            "baseline": str(args.baseline or args.baseline_prebuilt or " ".join(args.baseline_env)) or None,
            "torch": torch_info,
            "threads": ctx.threads,
            "quick": args.quick,
            "stream_add_gbps": ctx.stream,
            "inductor_cache": str(args.inductor_cache) if args.inductor_cache else None,
            "inductor_precompile": precompiled,
            "models": models,
            "geomean": summarize(ctx, models),
        }
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(result, indent=1) + "\n")
    json_out.with_name(json_out.stem + ".partial.json").unlink(missing_ok=True)
    print(report(ctx, result))
    log(f"results in {json_out}" + (f", compiled models in {ctx.compiled}" if out_dir else ""))
    failed = any(any(True for _ in errors_of(r)) or r.get("check", {}).get("pass") is False for r in models)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
