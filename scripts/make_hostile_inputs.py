#!/usr/bin/env python3
"""Builds broken and hostile .pt2 archives from the real samples, for test/test_hostile.cpp.

Usage: make_hostile_inputs.py OUTDIR [--samples SAMPLES_DIR] [--set hostile|cost]

Each case is a copy of samples/pointwise/model.pt2 (relu(x + y) * 2, no weights) or
samples/mlp/model.pt2 (two Linear layers, four weights) with exactly one thing wrong, written as
OUTDIR/<case>.pt2, plus OUTDIR/cases.json: a list of
  {"file", "expect_exit", "expect_message_substring", "description"}
where expect_message_substring is a lowercase word foundryc's one-line error message must contain
("" when any clean error will do). valid_hostile_names.pt2 is a *valid* graph whose value, node and
parameter names contain quotes, newlines, comment terminators, preprocessor lines, backslashes,
shell and format metacharacters and path components: it must be accepted (exit 0).

Archives are rebuilt the way torch.export.save writes them: every entry STORED, data 64-byte aligned
(padding in an extra field), all names under one root folder named after the file's stem.
Standard library only.
"""
import io
import json
import os
import struct
import sys
import zipfile

ALIGN = 64
MODEL_JSON = "models/model.json"
WEIGHTS_CONFIG = "data/weights/model_weights_config.json"


# ----------------------------------------------------------------------------- archives

def read_archive(path):
    """Returns the list of (name below the root folder, bytes) of a .pt2, in archive order."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        root = names[0].split("/", 1)[0]
        entries = []
        for name in names:
            if not name.startswith(root + "/"):
                raise SystemExit(f"{path}: entry {name!r} is not under the root folder {root!r}")
            entries.append((name[len(root) + 1:], z.read(name)))
    return entries


def archive_bytes(entries, root):
    """A ZIP like torch.export.save writes: STORED entries, data aligned to 64 bytes. An entry
    whose name starts with "//" is written with the rest of its name as it is, outside the root."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for rel, data in entries:
            name = rel[2:] if rel.startswith("//") else f"{root}/{rel}"
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            # Local header: 30 bytes + name + extra; pad the extra field so the data is aligned.
            start = buf.tell() + 30 + len(name.encode("utf-8")) + 4
            pad = (-start) % ALIGN
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            z.writestr(info, data)
    return buf.getvalue()


def stem(filename):
    return os.path.splitext(os.path.basename(filename))[0]


def get(entries, rel):
    for name, data in entries:
        if name == rel:
            return data
    raise KeyError(rel)


def replaced(entries, rel, data):
    """A copy of entries with rel's bytes replaced (rel must exist)."""
    get(entries, rel)
    return [(name, data if name == rel else old) for name, old in entries]


def without(entries, rel):
    get(entries, rel)
    return [(name, data) for name, data in entries if name != rel]


def load_json(entries, rel):
    return json.loads(get(entries, rel).decode("utf-8"))


def with_json(entries, rel, obj):
    return replaced(entries, rel, json.dumps(obj).encode("utf-8"))


def graph(program):
    return program["graph_module"]["graph"]


def node(program, name):
    for n in graph(program)["nodes"]:
        if n["name"] == name:
            return n
    raise KeyError(name)


def arg(n, arg_name):
    for a in n["inputs"]:
        if a["name"] == arg_name:
            return a
    raise KeyError(arg_name)


# ----------------------------------------------------------------------------- renaming

def rename_values(program, ren):
    """Renames tensor values (and the nodes named after them) everywhere they are referenced."""
    g = graph(program)
    sig = program["graph_module"]["signature"]

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "as_tensor" and isinstance(v, dict):
                    v["name"] = ren.get(v["name"], v["name"])
                elif k == "as_tensors" and isinstance(v, list):
                    for t in v:
                        t["name"] = ren.get(t["name"], t["name"])
                else:
                    walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)

    walk(g["inputs"])
    walk(g["outputs"])
    walk(g["nodes"])
    walk(sig)
    for n in g["nodes"]:
        n["name"] = ren.get(n["name"], n["name"])
    # Parameters and buffers in the signature hold a bare TensorArgument: {"arg": {"name": ...}}.
    for spec in sig["input_specs"]:
        for kind in spec.values():
            a = kind.get("arg") if isinstance(kind, dict) else None
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                a["name"] = ren.get(a["name"], a["name"])
    g["tensor_values"] = {ren.get(k, k): v for k, v in g["tensor_values"].items()}


def rename_parameters(program, config, ren):
    """Renames parameters (state-dict names) in the signature and the weights config."""
    for spec in program["graph_module"]["signature"]["input_specs"]:
        for kind in spec.values():
            if isinstance(kind, dict) and kind.get("parameter_name") in ren:
                kind["parameter_name"] = ren[kind["parameter_name"]]
    config["config"] = {ren.get(k, k): v for k, v in config["config"].items()}


# ----------------------------------------------------------------------------- cases

def deep_json(depth):
    return "[" * depth + "]" * depth


MANY_NODES = 10000
# Where an absolute ZIP entry name would land if foundryc used it as a path (the test checks).
ZIP_ESCAPE_ABSOLUTE = "/tmp/foundry_hostile_absolute_entry"


def chain_program(program, count, shared=False):
    """pointwise's relu(x + y) * 2 as a chain of `count` nodes: v = relu(v + y) * 2, again and
    again, the last value the output. With shared, every node is v[i] = v[i-1] + v[i-2] instead:
    each value has two readers, so none is inlined and the scheduler sees every node."""
    g = graph(program)
    template = {n["name"]: n for n in g["nodes"]}
    meta = g["tensor_values"]["mul"]
    nodes, values, prev, prev2 = [], {}, "x", "y"
    for i in range(count):
        op = "add" if shared else ("add", "relu", "mul")[i % 3]
        n = json.loads(json.dumps(template[op]))
        name = f"v{i}"
        n["name"] = name
        n["metadata"] = {}
        n["inputs"][0]["arg"] = {"as_tensor": {"name": prev}}
        if shared:
            n["inputs"][1]["arg"] = {"as_tensor": {"name": prev2}}
        n["outputs"] = [{"as_tensor": {"name": name}}]
        nodes.append(n)
        values[name] = meta
        prev, prev2 = name, prev
    g["nodes"] = nodes
    g["tensor_values"] = {"x": g["tensor_values"]["x"], "y": g["tensor_values"]["y"], **values}
    g["outputs"] = [{"as_tensor": {"name": prev}}]
    program["graph_module"]["signature"]["output_specs"] = [{"user_output": {"arg": {"as_tensor": {"name": prev}}}}]
    return program


def build_cases(samples):
    pw_path = os.path.join(samples, "pointwise", "model.pt2")
    mlp_path = os.path.join(samples, "mlp", "model.pt2")
    pw_raw = open(pw_path, "rb").read()
    pw = read_archive(pw_path)
    mlp = read_archive(mlp_path)

    def pw_prog():
        return load_json(pw, MODEL_JSON)

    def mlp_prog():
        return load_json(mlp, MODEL_JSON)

    def mlp_config():
        return load_json(mlp, WEIGHTS_CONFIG)

    cases = []  # (file, bytes or entries, expect_exit, substring, description)

    def add(file, content, substring, description, expect_exit=1):
        cases.append((file, content, expect_exit, substring, description))

    # --- not a usable ZIP
    add("truncated.pt2", pw_raw[: len(pw_raw) // 2], "zip",
        "the first half of a real archive: no central directory")
    add("empty.pt2", b"", "zip", "an empty file")
    add("not_a_zip.pt2", b"this is not a ZIP archive, just some text\n" * 8, "zip",
        "plain text")

    # --- the program JSON
    add("no_model_json.pt2", without(pw, MODEL_JSON), "model.json",
        "a ZIP with every entry but models/model.json")
    add("model_json_not_json.pt2", replaced(pw, MODEL_JSON, get(pw, MODEL_JSON)[:1000]), "json",
        "models/model.json cut off after 1000 bytes")
    p = pw_prog()
    graph(p)["nodes"] = "add, relu, mul"
    add("wrong_json_shape.pt2", with_json(pw, MODEL_JSON, p), "nodes",
        "valid JSON of the wrong shape: graph.nodes is a string")
    add("deep_json.pt2", replaced(pw, MODEL_JSON, deep_json(100000).encode()), "json",
        "models/model.json is an array nested 100000 deep")
    p = pw_prog()
    arg(node(p, "add"), "other")["arg"] = "@DEEP@"
    text = json.dumps(p).replace('"@DEEP@"', deep_json(100000))
    add("deep_json_in_node.pt2", replaced(pw, MODEL_JSON, text.encode()), "",
        "a node argument nested 100000 deep inside an otherwise valid program (any clean error)")
    p = pw_prog()
    p["schema_version"] = {"major": 5, "minor": 0}
    add("schema_major_5.pt2", with_json(pw, MODEL_JSON, p), "schema",
        "schema_version.major 5 (the corpus has 8)")

    # --- tensors, dtypes, shapes
    p = pw_prog()
    graph(p)["tensor_values"]["x"]["dtype"] = 99
    add("unknown_dtype.pt2", with_json(pw, MODEL_JSON, p), "dtype",
        "graph input x has dtype code 99")
    p = pw_prog()
    graph(p)["tensor_values"]["x"]["sizes"] = [{"as_int": -5}]
    add("negative_size.pt2", with_json(pw, MODEL_JSON, p), "size",
        "graph input x has size [-5]")

    # --- graph structure
    p = pw_prog()
    node(p, "relu")["target"] = "torch.ops.aten.frobnicate.default"
    add("unknown_op.pt2", with_json(pw, MODEL_JSON, p), "frobnicate",
        "the relu node calls torch.ops.aten.frobnicate.default")
    p = pw_prog()
    arg(node(p, "add"), "other")["arg"] = {"as_tensor": {"name": "relu"}}
    add("cyclic_graph.pt2", with_json(pw, MODEL_JSON, p), "cycle",
        "add uses relu's output and relu uses add's output")
    p = pw_prog()
    arg(node(p, "mul"), "self")["arg"] = {"as_tensor": {"name": "ghost_value"}}
    add("undefined_value.pt2", with_json(pw, MODEL_JSON, p), "ghost_value",
        "the mul node reads ghost_value, which nothing defines")
    p = pw_prog()
    rename_values(p, {"add": "dup_name"})
    node(p, "relu")["outputs"] = [{"as_tensor": {"name": "dup_name"}}]
    arg(node(p, "mul"), "self")["arg"] = {"as_tensor": {"name": "dup_name"}}
    del graph(p)["tensor_values"]["relu"]
    add("duplicate_value_names.pt2", with_json(pw, MODEL_JSON, p), "dup_name",
        "the add and relu nodes both define a value named dup_name")
    p = pw_prog()
    node(p, "add")["inputs"] = [{
        "name": "self",
        "arg": {"as_tensors": [{"name": "x"}, {"name": "y"}]},
        "kind": 1,
    }]
    add("wrong_arity.pt2", with_json(pw, MODEL_JSON, p), "add.tensor",
        "aten.add.Tensor called with one list argument instead of self and other")

    # --- weights (mlp: 0.weight [128,64] weight_0, 0.bias [128] weight_1, 2.weight, 2.bias)
    add("missing_weight_file.pt2", without(mlp, "data/weights/weight_2"), "weight",
        "data/weights/weight_2 (2.weight) is not in the archive")
    add("weight_too_short.pt2",
        replaced(mlp, "data/weights/weight_0", get(mlp, "data/weights/weight_0")[:100]), "weight",
        "weight_0 holds 100 bytes, 0.weight [128,64] float32 needs 32768")
    c = mlp_config()
    c["config"]["0.weight"]["path_name"] = "../../../../../../etc/passwd"
    add("weight_path_traversal.pt2", with_json(mlp, WEIGHTS_CONFIG, c), "weight",
        "0.weight's path_name climbs out of the archive")
    c = mlp_config()
    for entry in c["config"].values():
        entry["use_pickle"] = True
    p = mlp_prog()
    p["torch_version"] = "2.8.0+cpu"
    add("pickled_weights_torch28.pt2",
        with_json(with_json(mlp, WEIGHTS_CONFIG, c), MODEL_JSON, p), "re-export",
        "weights config with use_pickle: true, as torch <= 2.8 wrote it")
    huge = [{"as_int": 1000000000000}]
    c = mlp_config()
    c["config"]["0.bias"]["tensor_meta"]["sizes"] = huge
    p = mlp_prog()
    graph(p)["tensor_values"]["p_0_bias"]["sizes"] = huge
    add("enormous_weight_shape.pt2",
        with_json(with_json(mlp, WEIGHTS_CONFIG, c), MODEL_JSON, p), "size",
        "0.bias declared as [1000000000000] float32 (4 TB) with a 512-byte file")
    overflow = [{"as_int": 2 ** 62}, {"as_int": 2 ** 62}]
    c = mlp_config()
    c["config"]["0.weight"]["tensor_meta"]["sizes"] = overflow
    p = mlp_prog()
    graph(p)["tensor_values"]["p_0_weight"]["sizes"] = overflow
    add("overflowing_shape.pt2",
        with_json(with_json(mlp, WEIGHTS_CONFIG, c), MODEL_JSON, p), "size",
        "0.weight declared as [2**62, 2**62]: the element count overflows 64 bits")

    # --- ZIP entry names that would write outside a folder if used as paths; the graph is valid
    add("zip_absolute_entry.pt2", pw + [("//" + ZIP_ESCAPE_ABSOLUTE, b"absolute")], "root",
        "valid graph plus an entry named with an absolute path, outside the root folder")
    add("zip_dotdot_entry.pt2", pw + [("//../../foundry_hostile_dotdot", b"dotdot")], "root",
        "valid graph plus an entry named ../../foundry_hostile_dotdot, outside the root folder")
    add("zip_dotdot_inside_root.pt2", pw + [("../../foundry_hostile_inside_root", b"dotdot")], "",
        "valid graph plus an entry root/../../foundry_hostile_inside_root (unread, never written)",
        expect_exit=0)

    p = pw_prog()
    graph(p)["tensor_values"]["x"]["strides"] = [{"as_int": -1}]
    add("negative_stride.pt2", with_json(pw, MODEL_JSON, p), "stride",
        "input x declared with stride -1")

    # Non-finite constants: torch.export writes them as the strings "NaN", "Infinity".
    p = pw_prog()
    arg(node(p, "mul"), "other")["arg"] = {"as_float": "Infinity"}
    node(p, "add")["inputs"].append({"name": "alpha", "arg": {"as_float": "NaN"}, "kind": 2})
    add("nan_inf_constants.pt2", with_json(pw, MODEL_JSON, p), "",
        "relu(x + NaN*y) * inf: non-finite constants are emitted exactly", expect_exit=0)

    add("many_nodes.pt2", with_json(pw, MODEL_JSON, chain_program(pw_prog(), MANY_NODES)), "",
        f"a chain of {MANY_NODES} nodes (add, relu, mul repeated)", expect_exit=0)
    add("many_shared_nodes.pt2", with_json(pw, MODEL_JSON, chain_program(pw_prog(), MANY_NODES, shared=True)), "",
        f"{MANY_NODES} nodes v[i] = v[i-1] + v[i-2]: none inlined, all scheduled", expect_exit=0)

    # --- a valid graph with hostile names: must compile
    p = mlp_prog()
    c = mlp_config()
    rename_values(p, {
        "input": 'in"put',
        "permute": "perm\nute",
        "addmm": "addmm*/ /*",
        "relu": "#include <stdlib.h>",
        "permute_1": "back\\slash\\",
        "addmm_1": "../../out",
        "p_0_weight": "w.0",  # w.0 and w_0 collide when made into C identifiers naively
        "p_0_bias": "w_0",
        "p_2_weight": "${HOME}$(id)`id`%s%n",
        "p_2_bias": "b\t\u00fc\u2028",
    })
    rename_parameters(p, c, {
        "0.weight": '0.weight"*/\n#define X 1',
        "0.bias": "..\\..\\0.bias",
    })
    add("valid_hostile_names.pt2", with_json(with_json(mlp, WEIGHTS_CONFIG, c), MODEL_JSON, p), "",
        "valid mlp graph whose names hold quotes, newlines, */, #include, backslashes, ../ ...",
        expect_exit=0)

    # --- issue 16 (runtime): archive text in messages, empty dynamic ranges. Every byte of the
    # message must be printable and the message short, whatever the archive holds ("msg_" cases;
    # test_hostile.cpp checks all failing cases for it).
    escapes = "\x1b[2J\x1b[31m\x1b]0;title\x07\u009b6n\r\n\x7f"
    p = pw_prog()
    node(p, "relu")["target"] = "torch.ops.aten.pwned" + escapes + ".default"
    add("msg_escapes_in_op.pt2", with_json(pw, MODEL_JSON, p), "not supported",
        "the relu node calls an op whose name holds ANSI escapes, BEL, CSI, CR, LF and DEL")
    p = pw_prog()
    node(p, "relu")["target"] = "torch.ops.aten." + "x" * (1 << 20) + ".default"
    add("msg_huge_op.pt2", with_json(pw, MODEL_JSON, p), "not supported",
        "the relu node calls an op whose name is 1 MiB long")
    p = pw_prog()
    arg(node(p, "mul"), "self")["arg"] = {"as_tensor": {"name": "ghost" + escapes}}
    add("msg_escapes_in_value.pt2", with_json(pw, MODEL_JSON, p), "ghost",
        "the mul node reads an undefined value whose name holds terminal escapes")
    p = pw_prog()
    arg(node(p, "mul"), "self")["arg"] = {"as_tensor": {"name": "ghost" + "y" * (1 << 20)}}
    add("msg_huge_value.pt2", with_json(pw, MODEL_JSON, p), "ghost",
        "the mul node reads an undefined value whose name is 1 MiB long")
    c = mlp_config()
    c["config"]["0.weight"]["path_name"] = "weight" + escapes
    add("msg_escapes_in_weight_path.pt2", with_json(mlp, WEIGHTS_CONFIG, c), "weight",
        "0.weight's file name (missing) holds terminal escapes")
    mlp_dyn = read_archive(os.path.join(samples, "mlp_dynamic", "model.pt2"))
    p = load_json(mlp_dyn, MODEL_JSON)
    for r in p["range_constraints"].values():
        r["min_val"], r["max_val"] = 100, 10
    add("empty_dynamic_range.pt2", with_json(mlp_dyn, MODEL_JSON, p), "empty",
        "the batch size's range is [100, 10]: no input would be accepted")
    return cases


# ----------------------------------------------------------------------------- cost (issue 16 class 3)
# Valid graphs whose size is small but whose naive compile cost is not: every stage must stay
# near-linear in the graph. Written by `make_hostile_inputs.py OUTDIR --set cost` (the default
# set's tests count and run the valid cases of their own), with cases.json in the same format.

COST_SQUARINGS = 24       # v = mul(v, v): an inlined value read twice per node, 2**24 reads if copied
COST_PERMUTES = 4000      # permute(v, [1, 0]) chained: a view of a view of ...
COST_NEGATIONS = 100000   # neg chained: one long inlined chain


def unary_chain_program(program, count, make_node, sizes):
    """pointwise's program with x and y of `sizes`, as a chain of `count` nodes from x
    (make_node(i, prev, name) gives node i), then add(v, y) as the output."""
    g = graph(program)
    template = {n["name"]: n for n in g["nodes"]}
    meta = json.loads(json.dumps(g["tensor_values"]["x"]))
    meta["sizes"] = [{"as_int": n} for n in sizes]
    strides, step = [], 1
    for n in reversed(sizes):
        strides.insert(0, {"as_int": step})
        step *= n
    meta["strides"] = strides
    nodes, values, prev = [], {}, "x"
    for i in range(count):
        name = f"v{i}"
        n = make_node(i, prev, name, template)
        n["name"] = name
        n["metadata"] = {}
        n["outputs"] = [{"as_tensor": {"name": name}}]
        nodes.append(n)
        values[name] = meta
        prev = name
    out = json.loads(json.dumps(template["add"]))
    out["name"] = "out"
    out["metadata"] = {}
    out["inputs"][0]["arg"] = {"as_tensor": {"name": prev}}
    out["inputs"][1]["arg"] = {"as_tensor": {"name": "y"}}
    out["outputs"] = [{"as_tensor": {"name": "out"}}]
    nodes.append(out)
    values["out"] = meta
    g["nodes"] = nodes
    g["tensor_values"] = {"x": meta, "y": meta, **values}
    g["outputs"] = [{"as_tensor": {"name": "out"}}]
    program["graph_module"]["signature"]["output_specs"] = [{"user_output": {"arg": {"as_tensor": {"name": "out"}}}}]
    return program


def cost_cases(samples):
    pw = read_archive(os.path.join(samples, "pointwise", "model.pt2"))

    def square(i, prev, name, template):
        n = json.loads(json.dumps(template["add"]))
        n["target"] = "torch.ops.aten.mul.Tensor"
        n["inputs"] = [{"name": "self", "arg": {"as_tensor": {"name": prev}}, "kind": 1},
                       {"name": "other", "arg": {"as_tensor": {"name": prev}}, "kind": 1}]
        return n

    def permute(i, prev, name, template):
        return {"target": "torch.ops.aten.permute.default",
                "inputs": [{"name": "self", "arg": {"as_tensor": {"name": prev}}, "kind": 1},
                           {"name": "dims", "arg": {"as_ints": [1, 0]}, "kind": 1}]}

    def negate(i, prev, name, template):
        return {"target": "torch.ops.aten.neg.default",
                "inputs": [{"name": "self", "arg": {"as_tensor": {"name": prev}}, "kind": 1}]}

    cases = []
    for file, count, make, sizes, what in [
            ("cost_squarings.pt2", COST_SQUARINGS, square, [1024], "v = mul(v, v)"),
            ("cost_permutes.pt2", COST_PERMUTES, permute, [32, 32], "v = permute(v, [1, 0])"),
            ("cost_negations.pt2", COST_NEGATIONS, negate, [1024], "v = neg(v)")]:
        program = unary_chain_program(load_json(pw, MODEL_JSON), count, make, sizes)
        cases.append((file, with_json(pw, MODEL_JSON, program), 0, "",
                      f"{count} nodes {what} from x, then add(v, y)"))
    return cases


def main(argv):
    args = list(argv[1:])
    samples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples")
    if "--samples" in args:
        i = args.index("--samples")
        if i + 1 >= len(args):
            raise SystemExit("--samples needs a folder")
        samples = args[i + 1]
        del args[i:i + 2]
    case_set = "hostile"
    if "--set" in args:
        i = args.index("--set")
        if i + 1 >= len(args) or args[i + 1] not in ("hostile", "cost"):
            raise SystemExit("--set needs hostile or cost")
        case_set = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)

    listing = []
    builder = cost_cases if case_set == "cost" else build_cases
    for file, content, expect_exit, substring, description in builder(samples):
        data = content if isinstance(content, bytes) else archive_bytes(content, stem(file))
        with open(os.path.join(outdir, file), "wb") as f:
            f.write(data)
        listing.append({
            "file": file,
            "expect_exit": expect_exit,
            "expect_message_substring": substring,
            "description": description,
        })
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(listing, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
