#!/usr/bin/env python3
# File: testing/fuzz/make_onnx_seeds.py — writes the hand-made seed models of
# corpus/onnx_import/ (small: each covers an importer path, none is a real
# model). Run with Debian's python3-onnx:
#   /usr/bin/python3 testing/fuzz/make_onnx_seeds.py testing/fuzz/corpus/onnx_import
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=13, value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits),
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="kiln-fuzz-seed")
    m.ir_version = 8
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def seeds():
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4), "w")
    yield "add_broadcast", model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [vi("x", F, ["N", 4])], [vi("y", F, ["N", 4])], [w])

    cw = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "cw")
    cb = numpy_helper.from_array(np.zeros((2,), np.float32), "cb")
    yield "conv_relu_pool", model(
        [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                          strides=[2, 2])],
        [vi("x", F, [1, 1, 4, 4])], [vi("y", F, [1, 2, 2, 2])], [cw, cb])

    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    yield "shape_reshape_softmax", model(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)],
        [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12]), vi("s", TensorProto.INT64, [3])],
        [shape])

    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="relu")], "then",
                               [], [vi("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else",
                               [], [vi("e", F, [3])])
    yield "if_capture", model(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                          else_branch=else_g)],
        [vi("c", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, [3])])

    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc2"], name="body_add"),
         helper.make_node("Identity", ["cond"], ["cond2"], name="body_id")],
        "body", [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []),
                 vi("acc", F, [3])],
        [vi("cond2", TensorProto.BOOL, []), vi("acc2", F, [3])])
    yield "loop_accumulate", model(
        [helper.make_node("Loop", ["n", "", "a0"], ["y"], name="loop", body=body)],
        [vi("n", TensorProto.INT64, []), vi("a0", F, [3]), vi("x", F, [3])],
        [vi("y", F, [3])])

    idx = numpy_helper.from_array(np.array([[0, 2], [1, 0]], np.int64), "idx")
    yield "gather_matmul_cast", model(
        [helper.make_node("Gather", ["x", "idx"], ["g"], name="gather", axis=0),
         helper.make_node("MatMul", ["g", "m"], ["mm"], name="matmul"),
         helper.make_node("Cast", ["mm"], ["y"], name="cast", to=TensorProto.FLOAT16)],
        [vi("x", F, [3, 4]), vi("m", F, [4, 2])], [vi("y", TensorProto.FLOAT16, [2, 2, 2])],
        [idx])

    dims = numpy_helper.from_array(np.array([2, 3], np.int64), "dims")
    yield "constant_of_shape_expand", model(
        [helper.make_node("ConstantOfShape", ["dims"], ["z"], name="cos",
                          value=numpy_helper.from_array(np.array([1.5], np.float32))),
         helper.make_node("Expand", ["x", "dims"], ["e"], name="expand"),
         helper.make_node("Mul", ["z", "e"], ["y"], name="mul")],
        [vi("x", F, [1, 3])], [vi("y", F, [2, 3])], [dims])

    ext = TensorProto()
    ext.name = "wx"
    ext.data_type = F
    ext.dims.extend([4])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    yield "external_data", model(
        [helper.make_node("Add", ["x", "wx"], ["y"], name="add")],
        [vi("x", F, [4])], [vi("y", F, [4])], [ext])

    q = [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
         numpy_helper.from_array(np.array(3, np.uint8), "zp")]
    yield "qdq", model(
        [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
         helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dq")],
        [vi("x", F, [2, 2])], [vi("y", F, [2, 2])], q)

    yield "reduce_sum_axes_input", model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="rs", keepdims=0)],
        [vi("x", F, [2, 3, 4]), vi("axes", TensorProto.INT64, [1])], [vi("y", F, None)])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, m in seeds():
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
