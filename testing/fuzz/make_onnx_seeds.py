#!/usr/bin/env python3
# File: testing/fuzz/make_onnx_seeds.py — writes the hand-made seed models of
# corpus/onnx_import/ and corpus/onnx_compile/ (small: each covers an
# importer or compiler path, none is a real model). Run with Debian's
# python3-onnx:
#   /usr/bin/python3 testing/fuzz/make_onnx_seeds.py testing/fuzz/corpus/onnx_import
#   /usr/bin/python3 testing/fuzz/make_onnx_seeds.py --compile testing/fuzz/corpus/onnx_compile
# --compile writes the import seeds (but external_data, which needs a
# folder) and the compile seeds: fusions, layouts, reductions, subgraphs,
# and hostile names that must reach the generated C++ only sanitized.
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


def compile_seeds():
    rng = np.random.default_rng(0)

    def const(name, shape, dtype=np.float32):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)

    # conv + batch norm + relu: fold-batch-norm, post-op fusion, and 8
    # channels, so propagate-layout asks oneDNN for a blocked layout.
    bn = [const("scale", (8,)), const("bias", (8,)), const("mean", (8,)),
          numpy_helper.from_array(np.ones(8, np.float32), "var")]
    yield "conv_bn_relu", model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"],
                          name="bn"),
         helper.make_node("Relu", ["n"], ["r"], name="relu"),
         helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")],
        [vi("x", F, [1, 3, 8, 8])], [vi("y", F, [1, 8, 1, 1])],
        [const("w", (8, 3, 3, 3)), const("b", (8,))] + bn)

    # matmul + bias + tanh-gelu: elementwise fusion after a library call.
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    yield "matmul_bias_gelu", model(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
         helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
         helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
         helper.make_node("Add", ["t", "one"], ["t1"], name="add1"),
         helper.make_node("Mul", ["a", "t1"], ["g"], name="mul"),
         helper.make_node("Mul", ["g", "half"], ["y"], name="half")],
        [vi("x", F, [2, 4, 16])], [vi("y", F, [2, 4, 8])],
        [const("w", (16, 8)), const("b", (8,)), half, one])

    # layer norm written out: reductions fused with their elementwise users.
    eps = numpy_helper.from_array(np.array(1e-5, np.float32), "eps")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    yield "layer_norm_ops", model(
        [helper.make_node("ReduceMean", ["x"], ["mu"], name="mean", axes=[-1]),
         helper.make_node("Sub", ["x", "mu"], ["d"], name="sub"),
         helper.make_node("Pow", ["d", "two"], ["d2"], name="pow"),
         helper.make_node("ReduceMean", ["d2"], ["var"], name="var", axes=[-1]),
         helper.make_node("Add", ["var", "eps"], ["ve"], name="add"),
         helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
         helper.make_node("Div", ["d", "sd"], ["y"], name="div")],
        [vi("x", F, [3, 17])], [vi("y", F, [3, 17])], [eps, two])

    # data movement: transpose, concat, slice, split, reshape.
    starts = numpy_helper.from_array(np.array([1], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([5], np.int64), "ends")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    yield "transpose_concat_slice", model(
        [helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[0, 2, 1]),
         helper.make_node("Concat", ["t", "t"], ["c"], name="concat", axis=1),
         helper.make_node("Slice", ["c", "starts", "ends", "axes"], ["s"], name="slice"),
         helper.make_node("Split", ["s"], ["y0", "y1"], name="split", axis=2,
                          split=[1, 3])],
        [vi("x", F, [2, 6, 3])], [vi("y0", F, [2, 6, 1]), vi("y1", F, [2, 6, 3])],
        [starts, ends, axes], opset=11)

    # integer and boolean paths: comparison, where, argmax, cast.
    yield "where_argmax_int", model(
        [helper.make_node("Greater", ["x", "zero"], ["p"], name="gt"),
         helper.make_node("Where", ["p", "x", "zero"], ["r"], name="where"),
         helper.make_node("ArgMax", ["r"], ["am"], name="argmax", axis=1, keepdims=0),
         helper.make_node("Cast", ["am"], ["y"], name="cast", to=TensorProto.INT32)],
        [vi("x", F, [4, 5])], [vi("y", TensorProto.INT32, [4])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])

    # QDQ around a conv: fuse-qdq's integer convolution.
    qw = numpy_helper.from_array(rng.integers(-8, 8, (4, 2, 3, 3)).astype(np.int8), "qw")
    yield "qdq_conv", model(
        [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["qx"], name="qx"),
         helper.make_node("DequantizeLinear", ["qx", "sx", "zx"], ["dx"], name="dqx"),
         helper.make_node("DequantizeLinear", ["qw", "sw", "zw"], ["dw"], name="dqw"),
         helper.make_node("Conv", ["dx", "dw"], ["c"], name="conv"),
         helper.make_node("QuantizeLinear", ["c", "sx", "zx"], ["qy"], name="qy"),
         helper.make_node("DequantizeLinear", ["qy", "sx", "zx"], ["y"], name="dqy")],
        [vi("x", F, [1, 2, 6, 6])], [vi("y", F, [1, 4, 4, 4])],
        [qw, numpy_helper.from_array(np.array(0.1, np.float32), "sx"),
         numpy_helper.from_array(np.array(128, np.uint8), "zx"),
         numpy_helper.from_array(np.array(0.05, np.float32), "sw"),
         numpy_helper.from_array(np.array(0, np.int8), "zw")])

    # Scan: a running sum over the first axis.
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xi"], ["s2"], name="scan_add"),
         helper.make_node("Identity", ["s2"], ["o"], name="scan_id")],
        "scan_body", [vi("s", F, [4]), vi("xi", F, [4])], [vi("s2", F, [4]), vi("o", F, [4])])
    yield "scan_cumsum", model(
        [helper.make_node("Scan", ["s0", "x"], ["sn", "ys"], name="scan", body=body,
                          num_scan_inputs=1)],
        [vi("s0", F, [4]), vi("x", F, [3, 4])], [vi("sn", F, [4]), vi("ys", F, [3, 4])])

    # Hostile names everywhere (graph, values, nodes, a branch): bytes
    # outside the C++ emitter's alphabet, quotes, comment and line breaks,
    # non-ASCII, a long name. The compile target demands that none of it
    # reaches the generated C++ but as sanitized identifiers.
    evil = ['x@"*/\\\n', "$v`\x1b]0;t\x07", "name\nint main(){}", "\u00e9t\u00e9 /* c */",
            "//" + "n" * 300]
    x, a, r, c, y = evil[0], evil[1], evil[2], evil[3], evil[4]
    then_g = helper.make_graph([helper.make_node("Relu", [r], ["t@'"], name="then'@")],
                               "then\n`", [], [vi("t@'", F, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", [r], ["e$"], name="else\"")],
                               "else$", [], [vi("e$", F, [2, 3])])
    m = model(
        [helper.make_node("Add", [x, "w@"], [a], name=evil[2]),
         helper.make_node("Sigmoid", [a], [r], name=evil[3]),
         helper.make_node("ReduceMax", ["w@"], ["max*/"], name=evil[1], keepdims=0),
         helper.make_node("Greater", ["max*/", "zero'"], [c], name=evil[0]),
         helper.make_node("If", [c], [y], name=evil[4], then_branch=then_g,
                          else_branch=else_g)],
        [vi(x, F, [2, 3])], [vi(y, F, [2, 3]), vi(r, F, [2, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np.float32), "w@"),
         numpy_helper.from_array(np.array(0.0, np.float32), "zero'")])
    m.graph.name = evil[1] + evil[0]
    m.graph.node[1].doc_string = evil[2]
    yield "hostile_names", m


def main():
    args = sys.argv[1:]
    compile_set = "--compile" in args
    args = [a for a in args if a != "--compile"]
    out = args[0]
    os.makedirs(out, exist_ok=True)
    models = list(seeds())
    if compile_set:
        models = [(n, m) for n, m in models if n != "external_data"] + list(compile_seeds())
    for name, m in models:
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
