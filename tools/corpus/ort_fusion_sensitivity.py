#!/usr/bin/env python3
# File: tools/corpus/ort_fusion_sensitivity.py — how far ONNX Runtime's own
# output moves when one kind of its QDQ fusions is undone: a yardstick for the
# int8 check tolerance of a quantized model.
#
#   PY=~/.cache/kiln/corpus-venv/bin/python
#   $PY tools/corpus/ort_fusion_sensitivity.py ~/.cache/kiln/corpus/converted/vit_b_16.qdq
#
# ORT (ORT_ENABLE_ALL) writes its optimized graph; then, per fused op kind
# (QLinearMatMul with a run-time or a constant B, QLinearAdd, QLinearMul,
# QLinearSoftmax), every node of that kind is replaced by the ONNX form it
# came from (DequantizeLinear -> op -> QuantizeLinear), the graph is run
# without further optimization on test_data_set_0, and the result is compared
# with the stored reference (ORT's optimized output): max|got - ref| / max|ref|,
# the rule of check_corpus.py. The optimized graph is CPU-specific (ORT says
# so); it is written to a temporary folder and not kept.
import argparse
import glob
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

KINDS = ["QLinearMatMul:runtime-b", "QLinearMatMul:constant-b", "QLinearAdd", "QLinearMul",
         "QLinearSoftmax"]


def unfuse(model, kind):
    """The model with every node of `kind` written back as DQ -> op -> Q."""
    op_type, _, which = kind.partition(":")
    g = model.graph
    inits = {t.name for t in g.initializer}
    out, k = [], 0
    for n in g.node:
        i = list(n.input)
        if n.op_type != op_type or (which == "runtime-b" and i[3] in inits) or (
                which == "constant-b" and i[3] not in inits):
            out.append(n)
            continue
        k += 1
        p = f"unfused{k}_"
        if op_type == "QLinearSoftmax":
            axis = [a.i for a in n.attribute if a.name == "axis"][0]
            out += [helper.make_node("DequantizeLinear", i[0:3], [p + "x"]),
                    helper.make_node("Softmax", [p + "x"], [p + "y"], axis=axis),
                    helper.make_node("QuantizeLinear", [p + "y", i[3], i[4] if len(i) > 4 else ""],
                                     list(n.output))]
            continue
        op = {"QLinearMatMul": "MatMul", "QLinearAdd": "Add", "QLinearMul": "Mul"}[op_type]
        out += [helper.make_node("DequantizeLinear", i[0:3], [p + "a"]),
                helper.make_node("DequantizeLinear", i[3:6], [p + "b"]),
                helper.make_node(op, [p + "a", p + "b"], [p + "c"]),
                helper.make_node("QuantizeLinear", [p + "c", i[6], i[7] if len(i) > 7 else ""],
                                 list(n.output))]
    del g.node[:]
    g.node.extend(out)
    return model, k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", help="a converted model folder (model.onnx, test_data_set_0)")
    args = ap.parse_args()
    ds = os.path.join(args.model_dir, "test_data_set_0")
    inputs = [numpy_helper.to_array(onnx.load_tensor(f))
              for f in sorted(glob.glob(os.path.join(ds, "input_*.pb")))]
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(ds, "output_0.pb")))
    scale = float(np.abs(ref).max())

    def session(model_or_path, level):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        src = model_or_path if isinstance(model_or_path, str) else model_or_path.SerializeToString()
        return so, src

    L = ort.GraphOptimizationLevel
    with tempfile.TemporaryDirectory() as tmp:
        opt_path = os.path.join(tmp, "optimized.onnx")
        so, src = session(os.path.join(args.model_dir, "model.onnx"), L.ORT_ENABLE_ALL)
        so.optimized_model_filepath = opt_path
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        base = onnx.load(opt_path)
    names = [i.name for i in base.graph.input
             if i.name not in {t.name for t in base.graph.initializer}]
    feed = dict(zip(names, inputs))

    def rel(model, level=L.ORT_DISABLE_ALL):
        so, src = session(model, level)
        got = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).run(None, feed)[0]
        return float(np.abs(got - ref).max()) / scale

    print(f"{os.path.basename(args.model_dir.rstrip('/'))}: max|ref| {scale:.3g}")
    print(f"  ORT optimized graph as written: {rel(base):.3g}")
    print(f"  ORT without graph optimizations: "
          f"{rel(os.path.join(args.model_dir, 'model.onnx')):.3g}")
    for kind in KINDS:
        model, count = unfuse(onnx.load_from_string(base.SerializeToString()), kind)
        if count:
            print(f"  {kind} x{count} as DQ -> op -> Q: {rel(model):.3g}")


if __name__ == "__main__":
    main()
