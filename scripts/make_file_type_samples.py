#!/usr/bin/env python3
"""Writes tiny real files of the kinds users hand foundryc instead of a torch.export archive, for
test/test_cli.cpp ("cli: files that are not torch.export archives say what they are"):

  state_dict.pt         torch.save(model.state_dict())          a ZIP: data.pkl, data/0, version, byteorder
  pickled_module.pt     torch.save(model)                       the same layout, the module pickled whole
  legacy_state_dict.pt  torch.save(..., _use_new_zipfile_serialization=False)   a raw pickle stream
  torchscript.pt        torch.jit.script(model).save()          a ZIP with code/, data.pkl, constants.pkl
  aoti.pt2              torch._inductor.aoti_compile_and_package  a ZIP with data/aotinductor/ (a model.so)
  model.onnx            torch.onnx.export                       an ONNX ModelProto (protobuf)

Usage: make_file_type_samples.py OUTDIR   (needs torch, and onnxscript for the ONNX export)

The model is nn.Linear(2, 2) so that each file stays a few KB. The AOTInductor package holds a
compiled model.so; --strip-aoti keeps its layout (every entry name) and replaces the contents of
entries over 4 KiB by a short note, so that the committed copy stays small: foundryc recognises the
package by its entry names only.
"""
import argparse
import os
import sys
import zipfile

import torch


def strip_large_entries(path, limit=4096):
    """Rewrites the ZIP at `path` with the same entries in the same order, large ones replaced."""
    with zipfile.ZipFile(path) as src:
        entries = [(i, src.read(i)) for i in src.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for info, data in entries:
            if len(data) > limit:
                data = b"stripped by make_file_type_samples.py: %d bytes\n" % len(data)
            info.compress_type = zipfile.ZIP_STORED
            dst.writestr(info, data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--strip-aoti", action="store_true", help="replace large AOTInductor entries by a note")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    out = lambda name: os.path.join(args.outdir, name)

    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2).eval()
    example = (torch.randn(1, 2),)

    torch.save(model.state_dict(), out("state_dict.pt"))
    torch.save(model, out("pickled_module.pt"))
    torch.save(model.state_dict(), out("legacy_state_dict.pt"), _use_new_zipfile_serialization=False)
    torch.jit.script(model).save(out("torchscript.pt"))

    ep = torch.export.export(model, example)
    torch._inductor.aoti_compile_and_package(ep, package_path=out("aoti.pt2"))
    if args.strip_aoti:
        strip_large_entries(out("aoti.pt2"))

    torch.onnx.export(model, example, out("model.onnx"), dynamo=True, external_data=False)

    for name in sorted(os.listdir(args.outdir)):
        path = out(name)
        print(f"{name}: {os.path.getsize(path)} bytes, torch {torch.__version__}")
        if zipfile.is_zipfile(path):
            for n in zipfile.ZipFile(path).namelist():
                print("   ", n)
        else:
            with open(path, "rb") as f:
                print("    starts with", f.read(24).hex(" "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
