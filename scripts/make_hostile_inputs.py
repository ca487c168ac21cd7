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


# ----------------------------------------------------------------------------- bombs and integrity
# Archives with DEFLATED entries and header fields that lie: built with zipfile, then patched.

def deflated_archive(entries, root, deflate):
    """A ZIP of entries under root/, the ones named in `deflate` DEFLATED, the rest STORED."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rel, data in entries:
            info = zipfile.ZipInfo(f"{root}/{rel}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if rel in deflate else zipfile.ZIP_STORED
            z.writestr(info, data)
    return buf.getvalue()


def entry_headers(data, name):
    """(local header offset, central directory header offset) of the entry `name`."""
    eocd = data.rfind(b"PK\x05\x06")
    count, = struct.unpack_from("<H", data, eocd + 10)
    p, = struct.unpack_from("<I", data, eocd + 16)
    for _ in range(count):
        nlen, elen, clen = struct.unpack_from("<HHH", data, p + 28)
        local, = struct.unpack_from("<I", data, p + 42)
        if data[p + 46:p + 46 + nlen].decode() == name:
            return local, p
        p += 46 + nlen + elen + clen
    raise KeyError(name)


def with_declared_size(data, name, size):
    """The archive with `name`'s uncompressed size field set to `size` in both of its headers."""
    out = bytearray(data)
    local, central = entry_headers(data, name)
    struct.pack_into("<I", out, local + 22, size)
    struct.pack_into("<I", out, central + 24, size)
    return bytes(out)


def with_flipped_data_byte(data, name, at):
    """The archive with one byte of `name`'s (STORED) data inverted, its CRC left as it was."""
    out = bytearray(data)
    local, _ = entry_headers(data, name)
    nlen, elen = struct.unpack_from("<HH", data, local + 26)
    out[local + 30 + nlen + elen + at] ^= 0xFF
    return bytes(out)


def add_bomb_and_integrity_cases(add, pw, mlp):
    # A 4 GB model.json declared by a few kilobytes of deflate: more than deflate can produce
    # (1032:1 at most); it must be refused before anything is allocated.
    data = deflated_archive(pw, "zip_bomb_declared_size", {MODEL_JSON})
    data = with_declared_size(data, "zip_bomb_declared_size/" + MODEL_JSON, 0xF0000000)
    add("zip_bomb_declared_size.pt2", data, "compressed",
        "models/model.json (deflated, a few KB) declares 3.75 GiB uncompressed")
    # Weight entries that really inflate to 128 MiB each (the first bytes are the real tensor):
    # a valid model whose weights.bin must hold only what the tensors use.
    bombed = [(rel, d + bytes(BOMB_BYTES - len(d)) if rel in BOMB_WEIGHTS else d) for rel, d in mlp]
    add("zip_bomb_weights.pt2", deflated_archive(bombed, "zip_bomb_weights", set(BOMB_WEIGHTS)), "",
        "0.bias and 2.bias stored in deflated entries of 128 MiB each (the tensor, then zeros)",
        expect_exit=0)
    # A STORED weight whose bytes no longer match the CRC in its headers.
    data = archive_bytes(mlp, "zip_stored_crc_mismatch")
    data = with_flipped_data_byte(data, "zip_stored_crc_mismatch/data/weights/weight_0", 100)
    add("zip_stored_crc_mismatch.pt2", data, "crc",
        "one byte of the STORED entry weight_0 (0.weight) inverted; its CRC-32 is unchanged")


BOMB_WEIGHTS = ("data/weights/weight_1", "data/weights/weight_3")
BOMB_BYTES = 128 << 20


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

    add_bomb_and_integrity_cases(add, pw, mlp)
    out_of_bounds_cases(pw_prog, pw, add)

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



# ----------------------------------------------------------------------------- out-of-bounds ops
# Issue 16, class 1 (and class 9's argument checks): ops whose arguments pass the plain shape rules
# but would make a kernel read or write outside a buffer, and string arguments PyTorch refuses.
# Each is a small graph over x float32[32, 32], y int64 (the index) and z float32, built from
# pointwise's model.json. They must be refused at compile time and by --interpret alike
# ("full_pipeline" in cases.json), with PyTorch's reason; OOB_INPUTS says which inputs to write.

FLOAT32, INT64 = 7, 5


def tensor_meta(template, dtype, sizes):
    meta = json.loads(json.dumps(template))
    meta["dtype"] = dtype
    meta["sizes"] = [{"as_int": s} for s in sizes]
    strides, step = [], 1
    for s in reversed(sizes):
        strides.insert(0, step)
        step *= max(s, 1)
    meta["strides"] = [{"as_int": s} for s in strides]
    return meta


def as_arg(v):
    """A Python value as an export argument: ("t", name) a tensor, ("ts", [names or None]) an
    optional tensor list, str a string, int, float, bool, list of ints."""
    if isinstance(v, tuple) and v[0] == "t":
        return {"as_tensor": {"name": v[1]}}
    if isinstance(v, tuple) and v[0] == "ts":
        return {"as_optional_tensors": [{"as_none": True} if n is None else {"as_tensor": {"name": n}} for n in v[1]]}
    if isinstance(v, bool):
        return {"as_bool": v}
    if isinstance(v, int):
        return {"as_int": v}
    if isinstance(v, float):
        return {"as_float": v}
    if isinstance(v, str):
        return {"as_string": v}
    if isinstance(v, list):
        return {"as_ints": v}
    raise TypeError(v)


def op_program(program, inputs, target, args, out_sizes, out_dtype=FLOAT32):
    """pointwise's program with user inputs `inputs` ({name: (dtype, sizes)}) and one node
    out = target(**args) (args: [(name, value, kwarg_only)]) whose recorded result is out_sizes."""
    g = graph(program)
    template = g["tensor_values"]["x"]
    g["tensor_values"] = {name: tensor_meta(template, d, s) for name, (d, s) in inputs.items()}
    g["tensor_values"]["out"] = tensor_meta(template, out_dtype, out_sizes)
    g["inputs"] = [{"as_tensor": {"name": name}} for name in inputs]
    g["nodes"] = [{
        "target": f"torch.ops.aten.{target}",
        "inputs": [{"name": n, "arg": as_arg(v), "kind": 2 if kw else 1} for n, v, kw in args],
        "outputs": [{"as_tensor": {"name": "out"}}],
        "metadata": {},
        "name": "out",
    }]
    g["outputs"] = [{"as_tensor": {"name": "out"}}]
    sig = program["graph_module"]["signature"]
    sig["input_specs"] = [{"user_input": {"arg": {"as_tensor": {"name": name}}}} for name in inputs]
    sig["output_specs"] = [{"user_output": {"arg": {"as_tensor": {"name": "out"}}}}]
    return program


OOB_INPUTS = {}  # case file -> {input name: (dtype, sizes)}, in graph order


def out_of_bounds_cases(pw_prog, pw, add):
    X = ("t", "x")
    Y = ("t", "y")
    Z = ("t", "z")

    def case(file, inputs, target, args, out_sizes, substring, description, out_dtype=FLOAT32):
        program = op_program(pw_prog(), inputs, target, args, out_sizes, out_dtype)
        add(file, with_json(pw, MODEL_JSON, program), substring, description)
        OOB_INPUTS[file] = inputs

    x1 = {"x": (FLOAT32, [1024])}
    x2 = {"x": (FLOAT32, [32, 32])}
    case("as_strided_past_storage.pt2", x1, "as_strided.default",
         [("self", X, False), ("size", [32, 64], False), ("stride", [64, 1], False)], [32, 64], "out of bounds",
         "as_strided of x[1024] as [32, 64] with strides [64, 1]: reaches element 2047")
    case("as_strided_offset_past_storage.pt2", x1, "as_strided.default",
         [("self", X, False), ("size", [4], False), ("stride", [1], False), ("storage_offset", 1022, False)], [4],
         "out of bounds", "as_strided of x[1024] at storage offset 1022, 4 elements: reaches element 1025")
    case("as_strided_negative_stride.pt2", x1, "as_strided.default",
         [("self", X, False), ("size", [4], False), ("stride", [-1], False), ("storage_offset", 3, False)], [4],
         "negative", "as_strided with stride -1 (PyTorch refuses negative strides)")
    case("as_strided_negative_offset.pt2", x1, "as_strided.default",
         [("self", X, False), ("size", [4], False), ("stride", [1], False), ("storage_offset", -8, False)], [4],
         "negative", "as_strided with storage offset -8")
    case("gather_index_wider_than_self.pt2", {**x2, "y": (INT64, [64, 32])}, "gather.default",
         [("self", X, False), ("dim", 1, False), ("index", Y, False)], [64, 32], "gather",
         "gather(x[32, 32], 1, index[64, 32]): the index is larger than self outside dim 1")
    case("gather_index_rank.pt2", {**x2, "y": (INT64, [32])}, "gather.default",
         [("self", X, False), ("dim", 0, False), ("index", Y, False)], [32], "dimensions",
         "gather(x[32, 32], 0, index[32]): index and self differ in rank")
    case("gather_float_index.pt2", {**x2, "z": (FLOAT32, [32, 32])}, "gather.default",
         [("self", X, False), ("dim", 0, False), ("index", Z, False)], [32, 32], "int32/int64",
         "gather with a float32 index")
    case("scatter_src_smaller_than_index.pt2", {**x2, "y": (INT64, [32, 32]), "z": (FLOAT32, [16, 32])},
         "scatter.src", [("self", X, False), ("dim", 1, False), ("index", Y, False), ("src", Z, False)], [32, 32],
         "scatter", "scatter(x[32, 32], 1, index[32, 32], src[16, 32]): src is smaller than the index")
    case("scatter_add_index_wider_than_self.pt2", {**x2, "y": (INT64, [32, 64]), "z": (FLOAT32, [32, 64])},
         "scatter_add.default", [("self", X, False), ("dim", 0, False), ("index", Y, False), ("src", Z, False)],
         [32, 32], "scatter_add", "scatter_add(x[32, 32], 0, index[32, 64], src[32, 64]): writes past self's rows")
    case("scatter_value_index_wider_than_self.pt2", {**x2, "y": (INT64, [64, 32])},
         "scatter.value", [("self", X, False), ("dim", 1, False), ("index", Y, False), ("value", 1.0, False)],
         [32, 32], "scatter", "scatter(x[32, 32], 1, index[64, 32], 1.0): writes past self outside dim 1")
    case("scatter_reduce_index_wider_than_self.pt2", {**x2, "y": (INT64, [64, 32]), "z": (FLOAT32, [64, 32])},
         "scatter_reduce.two", [("self", X, False), ("dim", 1, False), ("index", Y, False), ("src", Z, False),
                                ("reduce", "sum", False)], [32, 32], "scatter_reduce",
         "scatter_reduce(x[32, 32], 1, index[64, 32], src, 'sum'): writes past self outside dim 1")
    case("scatter_reduce_junk.pt2", {**x2, "y": (INT64, [32, 32]), "z": (FLOAT32, [32, 32])},
         "scatter_reduce.two", [("self", X, False), ("dim", 1, False), ("index", Y, False), ("src", Z, False),
                                ("reduce", "junk", False)], [32, 32], "reduce",
         "scatter_reduce with reduce='junk'")
    case("index_put_values_not_broadcastable.pt2", {**x2, "y": (INT64, [8]), "z": (FLOAT32, [3])},
         "index_put.default", [("self", X, False), ("indices", ("ts", ["y"]), False), ("values", Z, False)],
         [32, 32], "broadcast", "x[y] = z with x[32, 32], y[8], z[3]: z does not broadcast to [8, 32]")
    case("index_put_too_many_indices.pt2", {**x2, "y": (INT64, [8])},
         "index_put.default", [("self", X, False), ("indices", ("ts", ["y", "y", "y"]), False), ("values", X, False)],
         [32, 32], "indices", "index_put with three index tensors into a 2-d tensor")
    case("select_scatter_src_shape.pt2", {**x2, "z": (FLOAT32, [16])},
         "select_scatter.default", [("self", X, False), ("src", Z, False), ("dim", 0, False), ("index", 3, False)],
         [32, 32], "select_scatter", "select_scatter(x[32, 32], src[16], 0, 3): src must be [32]")
    case("select_scatter_index_out_of_range.pt2", {**x2, "z": (FLOAT32, [32])},
         "select_scatter.default", [("self", X, False), ("src", Z, False), ("dim", 0, False), ("index", 40, False)],
         [32, 32], "select_scatter", "select_scatter(x[32, 32], src[32], 0, 40): index past dim 0")
    case("slice_scatter_src_shape.pt2", {**x2, "z": (FLOAT32, [16, 8])},
         "slice_scatter.default", [("self", X, False), ("src", Z, False), ("dim", 0, False), ("start", 0, False),
                                   ("end", 16, False)], [32, 32], "slice_scatter",
         "slice_scatter(x[32, 32], src[16, 8], 0, 0, 16): src must be [16, 32]")
    case("gelu_junk_approximate.pt2", x2, "gelu.default",
         [("self", X, False), ("approximate", "junk", True)], [32, 32], "approximate",
         "gelu(x, approximate='junk'): PyTorch accepts only 'none' and 'tanh'")
    case("div_junk_rounding_mode.pt2", {**x2, "z": (FLOAT32, [32, 32])}, "div.Tensor_mode",
         [("self", X, False), ("other", Z, False), ("rounding_mode", "junk", True)], [32, 32], "rounding_mode",
         "div(x, z, rounding_mode='junk'): PyTorch accepts only None, 'trunc' and 'floor'")


def npy_bytes(dtype, sizes):
    """A .npy file of zeros (standard library only): float32 or int64, C order."""
    descr = "<f4" if dtype == FLOAT32 else "<i8"
    shape = f"({sizes[0]},)" if len(sizes) == 1 else "(" + ", ".join(str(s) for s in sizes) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * ((-(10 + len(header) + 1)) % 64) + "\n"
    count = 1
    for s in sizes:
        count *= s
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(count * (4 if dtype == FLOAT32 else 8))


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
        if file in OOB_INPUTS:  # refused by every stage: inputs for --interpret next to it
            inputs_dir = os.path.join(outdir, stem(file) + ".inputs")
            os.makedirs(inputs_dir, exist_ok=True)
            for k, (dtype, sizes) in enumerate(OOB_INPUTS[file].values()):
                with open(os.path.join(inputs_dir, f"{k}.npy"), "wb") as f:
                    f.write(npy_bytes(dtype, sizes))
            listing[-1]["full_pipeline"] = True
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(listing, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
