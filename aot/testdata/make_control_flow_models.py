#!/usr/bin/python3
"""Writes the control-flow models aot/BUILD.bazel builds ahead of time.

Run with Debian's python3 (onnx 1.12) from this folder:
    /usr/bin/python3 make_control_flow_models.py
Weights come from a seeded generator, so the files are the same each run.

- if_nested.onnx: an If on an input flag (as a wake-word head branches on a
  score); its then branch is a MatMul + Add + Relu on captured weights, its
  else branch holds another If on a second flag.
- loop_state.onnx: a Loop with a run-time trip count and a condition the
  body computes, a carried state (tanh(s @ W + x)) and a scan output.
- scan_state.onnx: a Scan with a state and a scan input read along axis 1,
  its scan output written reversed.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261202)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def save(model, path):
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def if_nested():
    w = const("W", rng.normal(0, 0.3, (16, 16)))
    b = const("B", rng.normal(0, 0.1, (16,)))
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["mm"]),
         helper.make_node("Add", ["mm", "B"], ["pre"]),
         helper.make_node("Relu", ["pre"], ["then_y"])],
        "then", [], [helper.make_tensor_value_info("then_y", TensorProto.FLOAT, [2, 16])])
    inner_then = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["sig"]),
         helper.make_node("Mul", ["sig", "B"], ["inner_then_y"])],
        "inner_then", [],
        [helper.make_tensor_value_info("inner_then_y", TensorProto.FLOAT, [2, 16])])
    inner_else = helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["th"]),
         helper.make_node("Sub", ["th", "B"], ["inner_else_y"])],
        "inner_else", [],
        [helper.make_tensor_value_info("inner_else_y", TensorProto.FLOAT, [2, 16])])
    else_g = helper.make_graph(
        [helper.make_node("If", ["flag2"], ["else_y"], name="inner_if",
                          then_branch=inner_then, else_branch=inner_else)],
        "else", [], [helper.make_tensor_value_info("else_y", TensorProto.FLOAT, [2, 16])])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], name="outer_if",
                          then_branch=then_g, else_branch=else_g),
         helper.make_node("Mul", ["y", "y"], ["out"])],
        "if_nested",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
         helper.make_tensor_value_info("flag2", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 16])],
        initializer=[w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def loop_state():
    w = const("W", rng.normal(0, 0.3, (8, 8)))
    limit = numpy_helper.from_array(np.array(6, dtype=np.int64), "limit")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "W"], ["sw"]),
         helper.make_node("Add", ["sw", "x"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["s_out"]),
         helper.make_node("ReduceSum", ["s_out", "axes"], ["row_sum"], keepdims=0),
         helper.make_node("Less", ["i", "limit"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [4, 8]),
         helper.make_tensor_value_info("row_sum", TensorProto.FLOAT, [4])])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["true"],
                          value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["M", "true", "x"], ["s_final", "sums"], name="loop",
                          body=body)],
        "loop_state",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("s_final", TensorProto.FLOAT, [4, 8]),
         helper.make_tensor_value_info("sums", TensorProto.FLOAT, ["n", 4])],
        initializer=[w, limit, axes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def scan_state():
    a = const("A", rng.normal(0, 0.5, (6,)))
    body = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "A"], ["ha"]),
         helper.make_node("Add", ["ha", "x_t"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Add", ["h_out", "x_t"], ["y_t"])],
        "body",
        [helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [6])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["h0", "xs"], ["h_final", "ys"], name="scan", body=body,
                          num_scan_inputs=1, scan_input_axes=[1],
                          scan_output_directions=[1])],
        "scan_state",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, [6, 5])],
        [helper.make_tensor_value_info("h_final", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, [5, 6])],
        initializer=[a])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


if __name__ == "__main__":
    for name, make in [("if_nested", if_nested), ("loop_state", loop_state),
                       ("scan_state", scan_state)]:
        model = make()
        model.ir_version = 8
        save(model, name + ".onnx")
