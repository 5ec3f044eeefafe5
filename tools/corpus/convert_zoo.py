#!/usr/bin/env python3
# File: tools/corpus/convert_zoo.py — makes fp16 and int8 versions of kiln's zoo
# models with the ecosystem's own tools, and their ONNX Runtime reference outputs.
#
#   PY=~/.cache/kiln/corpus-venv/bin/python       # tools/corpus/setup_venv.sh
#   $PY tools/corpus/convert_zoo.py                      # every zoo model, every kind
#   $PY tools/corpus/convert_zoo.py --only resnet18,distilbert --kinds fp16,qdq --force
#
# Kinds (one folder <out>/<model>.<kind>/ each, in the ONNX test layout):
#   fp16   onnxconverter-common float16.convert_float_to_float16(keep_io_types=True);
#          an op ONNX Runtime's CPU provider has no fp16 kernel for is added to
#          op_block_list (kept fp32) and the conversion redone, as a user would;
#          when the converter leaves a Cast(to=float) with an fp16-typed output
#          (bert_base, distilbert, swin_t), the Casts to float go to node_block_list.
#   qdq    onnxruntime.quantization.quantize_static, QuantFormat.QDQ, u8
#          activations, s8 per-channel weights, MinMax calibration on seeded data.
#   qdq7   the same with reduce_range=True: 7-bit weights ([-64, 64]), which
#          oneDNN's int8 kernels run exactly on CPUs without VNNI.
#   dynu8  onnxruntime.quantization.quantize_dynamic, u8 weights (ConvInteger,
#          MatMulInteger + DynamicQuantizeLinear).
# The reference: ONNX Runtime's outputs for the zoo's own inputs
# (test_data_set_0/input_K.pb copied), written as output_K.pb. <out>/converted.json
# lists each model: kind, source, tool versions, ops, blocked ops, errors.
import argparse
import collections
import json
import os
import re
import shutil
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "benchmarks"))
from peer_bench import load_test_data  # noqa: E402  (one reader of test_data_set_0)

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME")
                     or os.path.join(os.path.expanduser("~"), ".cache"), "kiln")
KINDS = ("fp16", "qdq", "qdq7", "dynu8")
CALIB_SAMPLES = 8
CALIB_SEED = 20261202


def write_test_data(model_dir, inputs, outputs):
    data = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for prefix, items in (("input", inputs), ("output", outputs)):
        for i, (name, arr) in enumerate(items):
            t = numpy_helper.from_array(np.asarray(arr), name)
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())


def ort_session(path, threads=1):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def calibration_feeds(inputs, n, seed):
    """n seeded feeds shaped like the zoo's inputs: the stored input first, then
    floats drawn with its mean and spread, integer ids drawn within its range;
    0/1 masks stay the stored ones."""
    rng = np.random.default_rng(seed)
    feeds = [dict(inputs)]
    for _ in range(n - 1):
        f = {}
        for name, a in inputs:
            if a.dtype.kind == "f":
                f[name] = (rng.standard_normal(a.shape) * (a.std() or 1.0)
                           + a.mean()).astype(a.dtype)
            elif a.dtype.kind in "iu" and a.size and set(np.unique(a)) - {0, 1}:
                f[name] = rng.integers(int(a.min()), int(a.max()) + 1,
                                       size=a.shape).astype(a.dtype)
            else:
                f[name] = a.copy()
        feeds.append(f)
    return feeds


def convert_fp16(src, dst, log):
    from onnxconverter_common import float16
    model = onnx.load(src)
    blocked, nodes = [], []
    for _ in range(8):
        m16 = float16.convert_float_to_float16(
            model, keep_io_types=True,
            op_block_list=list(float16.DEFAULT_OP_BLOCK_LIST) + blocked,
            node_block_list=nodes or None)
        onnx.save(m16, dst)
        try:
            ort_session(dst)
            return {"op_block_list_added": blocked, "node_block_list": len(nodes)}
        except Exception as e:  # noqa: BLE001 — ORT names what it rejects
            m = re.search(r"implementation for (\w+)\(", str(e))
            if m and m.group(1) not in blocked:
                blocked.append(m.group(1))
                log(f"    ORT has no fp16 {m.group(1)} on CPU: keeping it fp32")
                continue
            if "Type Error" in str(e) and "Cast" in str(e) and not nodes:
                # The converter relabels a Cast(to=float)'s output as fp16 but
                # keeps its `to`: keep every Cast to float32 out of the conversion.
                nodes = [n.name for n in model.graph.node if n.op_type == "Cast" and
                         any(a.name == "to" and a.i == onnx.TensorProto.FLOAT
                             for a in n.attribute)]
                log(f"    converter left Cast(to=float) outputs typed fp16: "
                    f"keeping {len(nodes)} such Cast nodes out (node_block_list)")
                continue
            raise
    raise RuntimeError(f"still failing after blocking {blocked}")


def convert_qdq(src, dst, inputs, log, reduce_range=False):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,
                                          QuantFormat, QuantType, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(calibration_feeds(inputs, CALIB_SAMPLES, CALIB_SEED))

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True, reduce_range=reduce_range,
                    calibrate_method=CalibrationMethod.MinMax)
    return {"calibration": f"{CALIB_SAMPLES} seeded feeds (seed {CALIB_SEED}), MinMax",
            "activation": "u8",
            "weight": "s8 per-channel" + (", 7-bit (reduce_range)" if reduce_range else "")}


def convert_dynu8(src, dst, log):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(src, dst, weight_type=QuantType.QUInt8)
    return {"weight": "u8"}


def op_counts(path):
    m = onnx.load(path, load_external_data=False)
    return dict(collections.Counter(n.op_type for n in m.graph.node).most_common())


def main():
    p = argparse.ArgumentParser(description="fp16 and int8 versions of the zoo with ORT reference outputs (see tools/corpus/README.md)")
    p.add_argument("--zoo", default=os.path.join(CACHE, "zoo"))
    p.add_argument("--out", default=os.path.join(CACHE, "corpus", "converted"))
    p.add_argument("--only", default="", help="zoo models, comma-separated")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--force", action="store_true")
    p.add_argument("--list", action="store_true", help="print converted.json and exit")
    args = p.parse_args()
    index_path = os.path.join(args.out, "converted.json")
    index = {"models": []}
    if os.path.exists(index_path):
        index = json.load(open(index_path))
    if args.list:
        for m in index["models"]:
            print(f"{m['name']:32} {m.get('status'):6} {m.get('error', '')[:90]}")
        return 0
    zoo = json.load(open(os.path.join(args.zoo, "zoo.json")))["models"]
    only = [x for x in args.only.split(",") if x]
    kinds = [k for k in args.kinds.split(",") if k]
    bad = set(kinds) - set(KINDS)
    if bad:
        p.error(f"unknown kinds {sorted(bad)}; known {KINDS}")
    if only:
        unknown = set(only) - {m["name"] for m in zoo}
        if unknown:
            p.error(f"not in the zoo: {sorted(unknown)}")
        zoo = [m for m in zoo if m["name"] in only]
    import onnxconverter_common
    import onnxruntime
    tools = {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
             "onnxconverter_common": onnxconverter_common.__version__}
    by_name = {m["name"]: m for m in index["models"]}
    os.makedirs(args.out, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    for entry in zoo:
        src_dir = os.path.join(args.zoo, entry["name"])
        src = os.path.join(src_dir, "model.onnx")
        inputs, ref32 = load_test_data(src_dir)
        for kind in kinds:
            name = f"{entry['name']}.{kind}"
            dst_dir = os.path.join(args.out, name)
            dst = os.path.join(dst_dir, "model.onnx")
            if not args.force and by_name.get(name, {}).get("status") == "ok" \
                    and os.path.exists(dst):
                continue
            shutil.rmtree(dst_dir, ignore_errors=True)
            os.makedirs(dst_dir)
            rec = {"name": name, "source": entry["name"], "suite": entry["suite"],
                   "kind": kind, "tools": tools}
            t0 = time.perf_counter()
            log(f"{name}: converting")
            try:
                if kind == "fp16":
                    rec.update(convert_fp16(src, dst, log))
                elif kind in ("qdq", "qdq7"):
                    rec.update(convert_qdq(src, dst, inputs, log,
                                           reduce_range=kind == "qdq7"))
                else:
                    rec.update(convert_dynu8(src, dst, log))
                outs = ort_session(dst).run(None, dict(inputs))
                names = [o.name for o in ort_session(dst).get_outputs()]
                write_test_data(dst_dir, inputs, list(zip(names, outs)))
                # How far the converted model is from the fp32 original, for the record.
                rec["vs_fp32_rel"] = [
                    float(np.max(np.abs(o.astype(np.float64) - r)) /
                          (np.max(np.abs(r)) or 1.0))
                    if r.dtype.kind == "f" else float(not np.array_equal(o, r))
                    for o, (_, r) in zip(outs, ref32)]
                rec["ops"] = op_counts(dst)
                rec["model_bytes"] = os.path.getsize(dst)
                rec["status"] = "ok"
            except Exception as e:  # noqa: BLE001 — recorded, the run goes on
                rec["status"] = "failed"
                rec["error"] = f"{type(e).__name__}: {e}"[:800]
                log(f"  {name}: FAILED {rec['error'][:300]}")
            rec["seconds"] = round(time.perf_counter() - t0, 1)
            for f in os.listdir(args.out):  # quantize_static's augmented model
                if f.endswith("augmented_model.onnx"):
                    os.unlink(os.path.join(args.out, f))
            by_name[name] = rec
            index["models"] = sorted(by_name.values(), key=lambda m: m["name"])
            with open(index_path + ".tmp", "w") as f:
                json.dump(index, f, indent=1)
            os.replace(index_path + ".tmp", index_path)
            log(f"  {name}: {rec['status']} in {rec['seconds']} s"
                + (f", vs fp32 rel {max(rec['vs_fp32_rel']):.2e}"
                   if rec.get("vs_fp32_rel") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
