#!/usr/bin/env python3
"""Writes the com.microsoft.DynamicQuantizeLSTM models dynamic_quantize_lstm_test reads.

Run from this folder with a Python that has onnx, numpy and onnxruntime
(kiln's corpus venv: ~/.cache/kiln/corpus-venv/bin/python):
    python make_dynamic_quantize_lstm_models.py
Weights and inputs come from a seeded generator. Each model gets a folder
dq_lstm/<name>/ with model.onnx and test_data_set_0/ holding its inputs and
ONNX Runtime's outputs (the expected values, computed by ONNX Runtime's own
int8 kernel, which also quantizes X and h dynamically).

- bidir_s8: a bidirectional LSTM with bias, initial h / c and all three
  outputs, through onnxruntime.quantization.quantize_dynamic (int8 weights,
  one scale and zero point per direction).
- fwd_s8_per_column: a forward LSTM with bias, quantize_dynamic with
  per_channel=True (int8, scales per gate column, zero points 0).
- rev_u8: a reverse LSTM with peepholes, written by hand as quantize_dynamic
  never writes uint8 LSTM weights: uint8 weights with a nonzero zero point per
  direction.
- bidir_u8_opset12: a bidirectional LSTM quantized by hand like rev_u8, in an
  opset-12 model (whose DequantizeLinear has no axis).
- bidir_s8_per_column: a bidirectional LSTM, quantize_dynamic with
  per_channel=True.
"""
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

rng = np.random.default_rng(20261203)
SEQ, BATCH, INPUT, HIDDEN = 5, 2, 3, 4


def lstm_model(direction, peepholes, initial_state, outputs):
    d = 2 if direction == "bidirectional" else 1
    inits = [
        numpy_helper.from_array(rng.uniform(-0.6, 0.6, (d, 4 * HIDDEN, INPUT)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.uniform(-0.6, 0.6, (d, 4 * HIDDEN, HIDDEN)).astype(np.float32), "R"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (d, 8 * HIDDEN)).astype(np.float32), "B"),
    ]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [SEQ, BATCH, INPUT])]
    node_inputs = ["X", "W", "R", "B", "", "", "", ""]
    if initial_state:
        for k, name in ((5, "initial_h"), (6, "initial_c")):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [d, BATCH, HIDDEN]))
            node_inputs[k] = name
    if peepholes:
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, (d, 3 * HIDDEN)).astype(np.float32), "P"))
        node_inputs[7] = "P"
    while node_inputs[-1] == "":
        node_inputs.pop()
    shapes = {"Y": [SEQ, d, BATCH, HIDDEN], "Y_h": [d, BATCH, HIDDEN], "Y_c": [d, BATCH, HIDDEN]}
    node = helper.make_node("LSTM", node_inputs, outputs, "lstm", direction=direction,
                            hidden_size=HIDDEN)
    graph = helper.make_graph([node], "lstm", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o])
                               for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def quantized(model, per_channel):
    tmp = tempfile.mkdtemp()
    try:
        src, dst = os.path.join(tmp, "f.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(model, src)
        quantize_dynamic(src, dst, per_channel=per_channel, weight_type=QuantType.QInt8)
        return onnx.load(dst)
    finally:
        shutil.rmtree(tmp)


def hand_quantized_u8(model, opset=13):
    """The LSTM as a DynamicQuantizeLSTM with uint8 weights quantized per
    direction with their own zero point (asymmetric, as uint8 is)."""
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    lstm = g.node[0]
    new_inits = [numpy_helper.from_array(v, k) for k, v in inits.items() if k not in ("W", "R")]
    extra = []
    for name in ("W", "R"):
        w = inits[name]  # [D, 4H, K]
        d = w.shape[0]
        lo = np.minimum(w.reshape(d, -1).min(axis=1), 0)
        hi = np.maximum(w.reshape(d, -1).max(axis=1), 0)
        scale = ((hi - lo) / 255).astype(np.float32)
        zp = np.clip(np.round(-lo / scale), 0, 255).astype(np.uint8)
        q = np.clip(np.round(w / scale[:, None, None]) + zp[:, None, None], 0, 255).astype(np.uint8)
        new_inits.append(numpy_helper.from_array(np.ascontiguousarray(q.transpose(0, 2, 1)),
                                                 name + "_quantized"))
        new_inits.append(numpy_helper.from_array(scale, name + "_scale"))
        new_inits.append(numpy_helper.from_array(zp, name + "_zero_point"))
        extra += [name + "_scale", name + "_zero_point"]
    ins = list(lstm.input) + [""] * (8 - len(lstm.input))
    ins[1], ins[2] = "W_quantized", "R_quantized"
    node = helper.make_node("DynamicQuantizeLSTM", ins + extra, list(lstm.output), "lstm_quant",
                            domain="com.microsoft")
    node.attribute.extend(lstm.attribute)
    graph = helper.make_graph([node], g.name, list(g.input), list(g.output), new_inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                   helper.make_opsetid("com.microsoft", 1)])


def save(model, name):
    model.ir_version = 8  # what kiln and Debian's libonnx read (the venv's onnx writes newer)
    onnx.checker.check_model(model)
    assert any(n.op_type == "DynamicQuantizeLSTM" for n in model.graph.node), name
    folder = os.path.join("dq_lstm", name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    feeds = {}
    for k, vi in enumerate(model.graph.input):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.uniform(-1, 1, dims).astype(np.float32)
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[vi.name], vi.name).SerializeToString())
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    for k, (vi, v) in enumerate(zip(model.graph.output, outs)):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, vi.name).SerializeToString())


save(quantized(lstm_model("bidirectional", False, True, ["Y", "Y_h", "Y_c"]), False), "bidir_s8")
save(quantized(lstm_model("forward", False, False, ["Y", "Y_h"]), True), "fwd_s8_per_column")
save(hand_quantized_u8(lstm_model("reverse", True, True, ["Y", "Y_c"])), "rev_u8")
save(hand_quantized_u8(lstm_model("bidirectional", False, True, ["Y", "Y_h", "Y_c"]), 12),
     "bidir_u8_opset12")
save(quantized(lstm_model("bidirectional", False, False, ["Y"]), True), "bidir_s8_per_column")
