#!/usr/bin/env python3
# File: testing/fuzz/make_tensor_seeds.py — writes the hand-made seed files
# of corpus/tensor_proto/: serialized onnx.TensorProto files, one per reader
# path (raw_data and each typed field, every dtype kiln loads, bf16 stored
# as UINT16 the way ONNX's test data does, rank 0 and empty tensors, types
# kiln refuses), and external data pointing at the files the fuzz target
# puts next to its input (data.bin, sub/data.bin; escape.bin, up/ and fifo
# must be refused). Run with Debian's python3-onnx:
#   /usr/bin/python3 testing/fuzz/make_tensor_seeds.py testing/fuzz/corpus/tensor_proto
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def typed(name, dtype, dims, values):
    return helper.make_tensor(name, dtype, dims, values, raw=False)


def external(name, location, offset, length, dims=(6,)):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def seeds():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    yield "raw_f32", numpy_helper.from_array(a, "x")
    yield "raw_f16", numpy_helper.from_array(a.astype(np.float16), "x")
    yield "raw_f64", numpy_helper.from_array(a.astype(np.float64), "x")
    yield "raw_i64", numpy_helper.from_array(np.array([-1, 0, 1 << 40], np.int64), "i")
    yield "raw_i32", numpy_helper.from_array(np.array([[7, -7]], np.int32), "i")
    yield "raw_i8", numpy_helper.from_array(np.array([-128, 5, 127], np.int8), "i")
    yield "raw_u8", numpy_helper.from_array(np.array([0, 200, 255], np.uint8), "u")
    yield "raw_bool", numpy_helper.from_array(np.array([True, False, True]), "b")
    yield "raw_scalar", numpy_helper.from_array(np.array(3.5, np.float32), "s")
    yield "raw_empty", numpy_helper.from_array(np.zeros((0, 3), np.float32), "e")
    # bf16 as ONNX's test data stores it: UINT16 holding the bits.
    bits = (a.view(np.uint32) >> 16).astype(np.uint16)
    yield "raw_bf16_as_u16", numpy_helper.from_array(bits, "x")
    yield "typed_f32", typed("x", TensorProto.FLOAT, [2, 2], [1.0, -2.0, 3.5, 1e30])
    yield "typed_f64", typed("x", TensorProto.DOUBLE, [2], [1.0, -1e300])
    yield "typed_i64", typed("x", TensorProto.INT64, [3], [-5, 0, 1 << 50])
    yield "typed_i32", typed("x", TensorProto.INT32, [2], [-5, 1 << 30])
    yield "typed_i8", typed("x", TensorProto.INT8, [2], [-5, 100])
    yield "typed_bool", typed("x", TensorProto.BOOL, [2], [True, False])
    yield "typed_f16", typed("x", TensorProto.FLOAT16, [2], np.array([1.5, -2], np.float16))
    yield "typed_bf16", typed("x", TensorProto.BFLOAT16, [2], [1.5, -2.0])
    yield "string_refused", helper.make_tensor("s", TensorProto.STRING, [1], [b"abc"])
    yield "external_data", external("w", "data.bin", 16, 24)
    yield "external_sub", external("w", "sub/data.bin", 0, 24)
    yield "external_escape_link", external("w", "escape.bin", 0, 24)
    yield "external_linked_dir", external("w", "up/outside.bin", 0, 24)
    yield "external_fifo", external("w", "fifo", 0, 24)
    yield "external_past_end", external("w", "data.bin", 250, 24)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, t in seeds():
        with open(os.path.join(out, name + ".pb"), "wb") as f:
            f.write(t.SerializeToString())


if __name__ == "__main__":
    main()
