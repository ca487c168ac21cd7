#!/usr/bin/env python3
"""Writes a bfloat16 copy of samples/pointwise/model.pt2 (relu(x + y) * 2 on two [1024] tensors):
every tensor's dtype 7 (float32) becomes 13 (bfloat16), the rest of the archive unchanged. No
corpus sample has bfloat16 inputs, and torch (which would export one) is not installed here.

Usage: bfloat16_pointwise.py IN.pt2 OUT.pt2
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_hostile_inputs import MODEL_JSON, archive_bytes, read_archive  # noqa: E402

FLOAT32, BFLOAT16 = 7, 13  # torch.export's serialized ScalarType codes


def main(src, dst):
    entries = []
    for name, data in read_archive(src):
        if name == MODEL_JSON:
            program = json.loads(data)
            for value in program["graph_module"]["graph"]["tensor_values"].values():
                if value["dtype"] != FLOAT32:
                    raise SystemExit("%s: a tensor of dtype %s, expected only float32" % (src, value["dtype"]))
                value["dtype"] = BFLOAT16
            data = json.dumps(program).encode()
        entries.append((name, data))
    with open(dst, "wb") as f:
        f.write(archive_bytes(entries, os.path.splitext(os.path.basename(dst))[0]))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
