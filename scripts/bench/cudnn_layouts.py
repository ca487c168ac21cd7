"""Times every convolution of exported models with cuDNN in NCHW and in NHWC (channels_last), float32
with FMA math and with TF32, each as a replayed CUDA graph, and prints per model the sums and how
many convolutions each layout wins: the measurement behind foundryc's choice of layout on the GPU
(README "GPU (CUDA)").

    python3 scripts/bench/cudnn_layouts.py MODEL_DIR|SHAPES.json...   (needs a GPU)
    python3 scripts/bench/cudnn_layouts.py --extract SHAPES.json MODEL_DIR...   (no GPU: the
        convolutions of each model.pt2, by model, for a GPU host that lacks the archives)
    python3 scripts/bench/cudnn_layouts.py --algorithms MODEL_DIR|SHAPES.json...   (NCHW, FMA math:
        the algorithms of cuDNN's heuristic, as foundryc picks them, against the fastest measured
        ones, torch.backends.cudnn.benchmark)
"""
import json
import sys
import time

import torch


def graph_time_us(fn, repeat=10, rounds=5, iters=50):
    """Microseconds per call of fn, captured `repeat` times into one CUDA graph, best of rounds."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeat):
            fn()
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iters):
            graph.replay()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / (iters * repeat))
    return best * 1e6


def convolutions(path):
    """(input shape, weight shape, has bias, stride, padding, dilation, transposed, output padding,
    groups) of each aten.convolution in the exported program."""
    program = torch.export.load(path)
    found = []
    for node in program.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.convolution.default:
            x, w, b, stride, padding, dilation, transposed, output_padding, groups = node.args
            found.append((tuple(x.meta["val"].shape), tuple(w.meta["val"].shape), b is not None, stride, padding,
                          dilation, transposed, output_padding, groups))
    return found


def time_convolution(conv, channels_last):
    xs, ws, has_bias, stride, padding, dilation, transposed, output_padding, groups = conv
    fmt = torch.channels_last if channels_last and len(xs) == 4 else torch.contiguous_format
    x = torch.randn(xs, device="cuda").to(memory_format=fmt)
    w = torch.randn(ws, device="cuda").to(memory_format=fmt)
    b = torch.randn(ws[1] * groups if transposed else ws[0], device="cuda") if has_bias else None
    return graph_time_us(lambda: torch.ops.aten.convolution(x, w, b, stride, padding, dilation, transposed,
                                                            output_padding, groups))


def models(args):
    """(name, convolutions) of each MODEL_DIR (its model.pt2) or SHAPES.json (--extract's)."""
    for arg in args:
        if arg.endswith(".json"):
            with open(arg) as f:
                for name, convs in json.load(f).items():
                    yield name, [tuple(tuple(v) if isinstance(v, list) else v for v in c) for c in convs]
        else:
            yield arg.rstrip("/").split("/")[-1], convolutions(arg.rstrip("/") + "/model.pt2")


def compare_algorithms(args):
    torch.backends.cudnn.allow_tf32 = False
    print("| model | convolutions | heuristic sum (us) | measured sum (us) | measured / heuristic | faster by >10% |")
    print("|---|---|---|---|---|---|")
    for name, convs in models(args):
        if not convs:
            continue
        times = {}
        for measured in (False, True):
            torch.backends.cudnn.benchmark = measured
            times[measured] = [time_convolution(c, False) for c in convs]
        wins = sum(1 for a, b in zip(times[False], times[True]) if b < 0.9 * a)
        print(f"| {name} | {len(convs)} | {sum(times[False]):.1f} | {sum(times[True]):.1f} | "
              f"{sum(times[True]) / sum(times[False]):.2f} | {wins} |", flush=True)


def main():
    if sys.argv[1:2] == ["--extract"]:
        with open(sys.argv[2], "w") as f:
            json.dump(dict(models(sys.argv[3:])), f)
        return
    if sys.argv[1:2] == ["--algorithms"]:
        return compare_algorithms(sys.argv[2:])
    torch.backends.cudnn.benchmark = False  # cuDNN's heuristic, as foundryc's calls use it
    print("| model | math | convolutions | NCHW sum (us) | NHWC sum (us) | NHWC / NCHW | NHWC faster by >10% |")
    print("|---|---|---|---|---|---|---|")
    for name, convs in models(sys.argv[1:]):
        if not convs:
            continue
        for tf32 in (False, True):
            torch.backends.cudnn.allow_tf32 = tf32
            nchw = [time_convolution(c, False) for c in convs]
            nhwc = [time_convolution(c, True) for c in convs]
            wins = sum(1 for a, b in zip(nchw, nhwc) if b < 0.9 * a)
            print(f"| {name} | {'TF32' if tf32 else 'FMA'} | {len(convs)} | {sum(nchw):.1f} | {sum(nhwc):.1f} | "
                  f"{sum(nhwc) / sum(nchw):.2f} | {wins} |", flush=True)


if __name__ == "__main__":
    main()
