#!/usr/bin/env python3
"""Compiles and runs every model of a zoo written by scripts/zoo/export.py; scripts/zoo.sh calls it
(see there for usage). Standard library only: it runs under the system python3.

For each model and each archive kind (core: model.pt2, raw: model.raw.pt2) it compiles into a fresh
NAME/out.KIND with $FOUNDRYC (--cache-dir ZOO/.cache), then runs $FOUNDRY_RUN on inputs/ against
expected/ and, for a dynamic model, on each cases/bN. Each step's output is kept in
NAME/out.KIND.log. The table goes to stdout and ZOO/zoo.md, the same data to ZOO/zoo.json.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

KINDS = {"core": "model.pt2", "raw": "model.raw.pt2"}
STATIC_FALLBACK = "compiles for the sizes recorded at export"  # the histogram's name for lowering.cpp's warnings


def run(cmd, timeout):
    """(exit status or 'timeout', stdout + stderr)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.output or b"").decode("utf-8", "replace")


def first_line(text, prefix):
    for line in text.splitlines():
        if line.startswith(prefix):
            return line.strip()
    return None


def classify_compile_error(status, text):
    """(class, short message) of a failed compile."""
    if status == "timeout":
        return "timeout", "compile timed out"
    line = first_line(text, "foundryc: error:") or (text.strip().splitlines() or ["exit %s" % status])[-1]
    msg = line.replace("foundryc: error: ", "")
    msg = re.sub(r"^\S+\.pt2: ", "", msg)  # the archive's path: the table's row already names it
    op = re.search(r"operator (\S+) is not supported", msg)
    if op:
        return "unsupported op " + op.group(1), msg
    if "cannot keep the sizes dynamic" in msg:
        return "dynamic size unsupported (a lowering that needs static sizes)", msg
    if "known only at run time" in msg:
        return "dynamic size unsupported (a symbolic int known only at run time)", msg
    if status == 3 or "internal error" in msg:
        return "internal error", msg
    return "user error", msg


def is_static_fallback(warning):
    return "sizes recorded at export" in warning


def run_case(args, out, folder, label):
    """Runs the compiled model on folder/inputs against folder/expected: (passed, FAIL line or error)."""
    cmd = [args.foundry_run, out, "--inputs", os.path.join(folder, "inputs"),
           "--expected", os.path.join(folder, "expected"), "--atol", str(args.atol), "--rtol", str(args.rtol)]
    status, text = run(cmd, args.run_timeout)
    if status == 0:
        return True, None, text
    if status == "timeout":
        return False, "%s: run timed out" % label, text
    fail = first_line(text, "output ") if "FAIL" in text else None
    fail = next((l for l in text.splitlines() if ": FAIL: " in l), None) or fail
    detail = fail or (first_line(text, "foundry-run: error:") or text.strip().splitlines()[-1:] or ["?"])[0]
    return False, "%s: %s" % (label, detail.strip()), text


def sweep_archive(args, model_dir, meta, kind):
    """Compiles one archive and runs it; a dict for the table and the JSON."""
    archive = os.path.join(model_dir, KINDS[kind])
    out = os.path.join(model_dir, "out." + kind)
    result = dict(compiled=False, matches=None, warnings=[], error=None, error_class=None,
                  dynamic_served=[], dynamic_failed=[])
    if not os.path.exists(archive):
        result.update(error="no " + KINDS[kind], error_class="not exported")
        return result
    shutil.rmtree(out, ignore_errors=True)  # a fresh output folder: never a previous run's model.so
    start = time.time()
    status, text = run([args.foundryc, archive, "-o", out, "--cache-dir", args.cache_dir], args.compile_timeout)
    result["compile_s"] = round(time.time() - start, 1)
    log = ["$ foundryc %s (exit %s, %.1f s)" % (archive, status, result["compile_s"]), text]
    result["warnings"] = [l.replace("foundryc: warning: ", "") for l in text.splitlines()
                          if l.startswith("foundryc: warning:")]
    if status != 0:
        result["error_class"], result["error"] = classify_compile_error(status, text)
    else:
        result["compiled"] = True
        passed, problem, text = run_case(args, out, model_dir, "export batch")
        log.append("$ export batch\n" + text)
        result["matches"] = passed
        if not passed:
            result["error"], result["error_class"] = problem, "mismatch" if ": FAIL" in problem else "run error"
        for case in meta.get("cases", []):
            ok, case_problem, text = run_case(args, out, os.path.join(model_dir, "cases", case), case)
            log.append("$ %s\n%s" % (case, text))
            (result["dynamic_served"] if ok else result["dynamic_failed"]).append(case)
            if not ok and result["error"] is None:
                result["error"], result["error_class"] = case_problem, "dynamic batch fails"
        # A dynamic model compiled for its export sizes only: that, not each batch it then refuses, is the cause.
        if result["error_class"] in (None, "dynamic batch fails") and any(map(is_static_fallback, result["warnings"])):
            result["error"] = next(w for w in result["warnings"] if is_static_fallback(w))
            result["error_class"] = "dynamic fallback: " + STATIC_FALLBACK
    with open(out + ".log", "w") as f:
        f.write("\n".join(log))
    return result


def short(text, n):
    text = (text or "").replace("|", "\\|")
    return text if len(text) <= n else text[:n - 1] + "…"


def yes_no(value):
    return {True: "yes", False: "no", None: "-"}[value]


def table(results, kinds):
    head = ["model", "family"] + ["%s: compiled? matches?" % k for k in kinds] + ["dynamic batches served",
                                                                                "first error", "warnings"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r["name"], r["family"]]
        for k in kinds:
            a = r[k]
            cells.append("%s / %s" % (yes_no(a["compiled"]), yes_no(a["matches"])))
        served = ", ".join("%s %s" % (k, " ".join(r[k]["dynamic_served"]) or "none") for k in kinds) \
            if r["dynamic"] else "-"
        first = next(("%s: %s" % (k, r[k]["error"]) for k in kinds if r[k]["error"]), "")
        warns = sorted({w for k in kinds for w in r[k]["warnings"]})
        cells += [served, short(first, 140), short("; ".join(warns), 100)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def totals(results, kinds):
    n = len(results)
    lines = ["", "Totals (%d models):" % n]
    for k in kinds:
        compiled = sum(r[k]["compiled"] for r in results)
        matching = sum(bool(r[k]["matches"]) and not r[k]["dynamic_failed"] for r in results)
        lines.append("- %s: %d/%d compiled, %d/%d match" % (k, compiled, n, matching, n))
    lines += ["", "First errors by class (archives):", "", "| class | archives | models |", "|---|---|---|"]
    classes = collections.defaultdict(list)
    for r in results:
        for k in kinds:
            if r[k]["error_class"]:
                classes[r[k]["error_class"]].append("%s (%s)" % (r["name"], k))
    for cls, where in sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append("| %s | %d | %s |" % (short(cls, 80), len(where), ", ".join(where)))
    warned = [(r["name"], k, w) for r in results for k in kinds for w in r[k]["warnings"]]
    lines += ["", "foundryc warnings: %d" % len(warned)]
    lines += ["- %s (%s): %s" % (name, k, short(w, 200)) for name, k, w in warned]
    return lines


def models(zoo, only):
    names = sorted(d for d in os.listdir(zoo) if os.path.isfile(os.path.join(zoo, d, "meta.json")))
    if only:
        wanted = only.split(",")
        missing = [n for n in wanted if n not in names]
        if missing:
            sys.exit("zoo.sh: error: not in %s: %s" % (zoo, ", ".join(missing)))
        names = [n for n in names if n in wanted]
    return names


def main():
    p = argparse.ArgumentParser(description="compile and run the zoo exported by scripts/zoo/export.py")
    p.add_argument("zoo")
    p.add_argument("--only", help="comma-separated model names")
    p.add_argument("--kinds", default="core,raw", help="archive kinds to compile: core (model.pt2), raw (model.raw.pt2)")
    p.add_argument("--compile-timeout", type=int, default=300)
    p.add_argument("--run-timeout", type=int, default=120)
    p.add_argument("--resume", action="store_true",
                   help="keep the results in ZOO/zoo.json of models swept before (with the same kinds)")
    p.add_argument("--table-only", action="store_true", help="print the table of ZOO/zoo.json again, compiling nothing")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4)
    args = p.parse_args()
    args.foundryc = os.environ.get("FOUNDRYC", "build/foundryc")
    args.foundry_run = os.environ.get("FOUNDRY_RUN", "build/foundry-run")
    args.cache_dir = os.path.join(args.zoo, ".cache")
    kinds = args.kinds.split(",")
    done = previous_results(args.zoo, kinds) if args.resume or args.table_only else {}
    if args.table_only:
        results = [done[name] for name in models(args.zoo, args.only) if name in done]
        print("\n".join(table(results, kinds) + totals(results, kinds)))
        return 0
    results = []
    for name in models(args.zoo, args.only):
        if name in done:
            results.append(done[name])
            continue
        with open(os.path.join(args.zoo, name, "meta.json")) as f:
            meta = json.load(f)
        r = dict(name=name, family=meta["family"], dynamic=meta["dynamic"], params=meta["params"])
        for k in kinds:
            r[k] = sweep_archive(args, os.path.join(args.zoo, name), meta, k)
            print("zoo: %-40s %-4s compiled %-3s matches %-3s %s" % (
                name, k, yes_no(r[k]["compiled"]), yes_no(r[k]["matches"]), short(r[k]["error"], 120)),
                file=sys.stderr, flush=True)
        results.append(r)
        write(args, kinds, results)  # after every model, so an interrupted sweep still leaves its table
    print("\n".join(table(results, kinds) + totals(results, kinds)))
    return 0


def previous_results(zoo, kinds):
    """Results of an earlier (perhaps interrupted) sweep, by model name, for --resume."""
    try:
        with open(os.path.join(zoo, "zoo.json")) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    return {r["name"]: r for r in data["models"] if data["kinds"] == kinds}


def write(args, kinds, results):
    with open(os.path.join(args.zoo, "zoo.md"), "w") as f:
        f.write("\n".join(table(results, kinds) + totals(results, kinds)) + "\n")
    with open(os.path.join(args.zoo, "zoo.json"), "w") as f:
        json.dump(dict(atol=args.atol, rtol=args.rtol, kinds=kinds, models=results), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
