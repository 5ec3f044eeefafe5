#!/usr/bin/env python3
# File: tools/corpus/qdq_trace.py — where a QDQ model's kiln output leaves
# ONNX Runtime's: every QuantizeLinear output compared, along the whole run and
# node by node.
#
#   PY=~/.cache/kiln/corpus-venv/bin/python
#   $PY tools/corpus/qdq_trace.py ~/.cache/kiln/corpus/converted/efficientnet_b0.qdq \
#       --kilnc K [--ref opt|noopt] [--pixels 10] [--work DIR]
#
# 1. trace: a copy of the model with every QuantizeLinear output as a graph
#    output; ORT (--ref opt: its fused int8 kernels; noopt: graph optimizations
#    off, the Q/DQ arithmetic as ONNX writes it) writes the expected values and
#    `kilnc check --verbose` compares them, in u8 units: the first tensor more
#    than one step off, and how the differences grow.
# 2. local: the same model with every reader of a Q output T reading a new
#    graph input fed with ORT's T, so each Q output kiln computes starts from
#    ORT's own inputs; what differs here is one op's arithmetic, not
#    propagation (ORT's expected values are recomputed on this cut model).
# 3. sensitivity: how far ORT's own output moves when one input pixel moves by
#    one quantization step of the model's first QuantizeLinear (--pixels
#    random pixels), the yardstick for a whole-model tolerance.
# 4. tables: per DequantizeLinear -> Sigmoid -> QuantizeLinear, the entries
#    of its 256-entry table where ORT's value, the correctly rounded f32
#    sigmoid's and the f32 formula 1.0f / (1.0f + expf(-x))'s differ (each
#    quantized in f32 as QuantizeLinear does).
import argparse
import os
import re
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, shape_inference


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def save_pb(path, name, a):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(a), name).SerializeToString())


def session(model, level, threads=1):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if level == "opt"
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


def inputs_of(model_dir):
    out, i = [], 0
    while os.path.exists(os.path.join(model_dir, "test_data_set_0", f"input_{i}.pb")):
        out.append(load_pb(os.path.join(model_dir, "test_data_set_0", f"input_{i}.pb")))
        i += 1
    return out


def write_folder(folder, model, inputs, level):
    """An ONNX test folder: the model, the inputs, ORT's outputs."""
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for i, (n, a) in enumerate(inputs):
        save_pb(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), n, a)
    s = session(model, level)
    outs = s.run(None, dict(inputs))
    names = [o.name for o in s.get_outputs()]
    for k, a in enumerate(outs):
        save_pb(os.path.join(folder, "test_data_set_0", f"output_{k}.pb"), names[k], a)
    return dict(zip(names, outs))


def exposed(model):
    """The model with every QuantizeLinear output also a graph output."""
    m = shape_inference.infer_shapes(model)
    vi = {v.name: v for v in list(m.graph.value_info) + list(m.graph.output)}
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        o = n.output[0]
        if n.op_type == "QuantizeLinear" and o not in have:
            m.graph.output.append(vi[o] if o in vi else helper.make_tensor_value_info(
                o, onnx.TensorProto.UINT8, None))
            have.add(o)
    return m


def cut(model, values):
    """Every reader of a Q output T reads graph input T__cut (ORT's T) instead."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    q = {n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            if x in q:
                n.input[i] = x + "__cut"
    feeds = []
    for t in sorted(q):
        a = values[t]
        m.graph.input.append(helper.make_tensor_value_info(
            t + "__cut", helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        feeds.append((t + "__cut", a))
    return m, feeds


ROW = re.compile(r"\s+(PASS|FAIL)\s+output (\d+) '([^']+)' (\S+)\s+max\|ref\| \S+\s+max_abs (\S+)"
                 r".*mismatches (\d+)/(\d+)")


def kiln_diffs(kilnc, folder, threads):
    p = subprocess.run([kilnc, "check", folder, "--max-rel=0.1", "--verbose",
                        f"--threads={threads}"], capture_output=True, text=True)
    rows = [(int(m.group(2)), m.group(3), m.group(4), float(m.group(5)), int(m.group(6)),
             int(m.group(7))) for m in map(ROW.match, (p.stdout + p.stderr).splitlines()) if m]
    if not rows:
        raise SystemExit(f"kilnc check {folder} printed no comparisons:\n{p.stdout}{p.stderr}")
    return sorted(rows)


def short(name):
    return name.replace("_QuantizeLinear_Output", "")


def report_trace(rows):
    q = [r for r in rows if r[2].startswith(("u8", "i8"))]
    first = next((r for r in q if r[3] > 1), None)
    off = [r for r in q if r[4]]
    print(f"  {len(off)} of {len(q)} Q outputs differ; first more than one step off: "
          + (f"{short(first[1])} ({first[3]:.0f} steps, {first[4]}/{first[5]})" if first
             else "none"))
    for r in off[:8]:
        print(f"    {short(r[1])}: max {r[3]:.0f} steps, {r[4]}/{r[5]} elements")
    for r in rows:
        if not r[2].startswith(("u8", "i8")):
            print(f"  output {r[1]} {r[2]}: max_abs {r[3]}, {r[4]}/{r[5]} elements differ")


def sensitivity(model, inputs, level, pixels, seed=0):
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear")
    step = float(np.asarray(init[q.input[1]]).ravel()[0])
    s = session(model, level)
    name, x = inputs[0]
    base = s.run(None, dict(inputs))[0]
    rng = np.random.default_rng(seed)
    rels = []
    for _ in range(pixels):
        xp = x.copy()
        xp.flat[rng.integers(x.size)] += step
        got = s.run(None, dict(inputs[:0] + [(name, xp)] + inputs[1:]))[0]
        rels.append(float(np.abs(got - base).max() / np.abs(base).max()))
    return sorted(rels)


def sigmoid_tables(model):
    """Per DQ -> Sigmoid -> Q: the 256 entries as ORT computes them, from the
    correctly rounded f32 sigmoid, and from the f32 formula 1.0f / (1.0f +
    expf(-x)) (libm's expf), each quantized in f32 (x / scale, half to even)."""
    import ctypes
    libm = ctypes.CDLL("libm.so.6")
    libm.expf.restype, libm.expf.argtypes = ctypes.c_float, [ctypes.c_float]
    f32 = np.float32
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    prod = {o: n for n in model.graph.node for o in n.output}
    g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "s",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [256])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [256])])
    s = session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "opt")
    total, found = 0, []
    for n in model.graph.node:
        dq = prod.get(n.input[0]) if n.input else None
        qs = [c for c in model.graph.node if c.op_type == "QuantizeLinear" and
              n.output[0] in c.input]
        if n.op_type != "Sigmoid" or dq is None or dq.op_type != "DequantizeLinear" or not qs:
            continue
        xs, xz = f32(init[dq.input[1]]), int(init[dq.input[2]])
        ys, yz = f32(init[qs[0].input[1]]), int(init[qs[0].input[2]])
        lo, hi = (0, 255) if init[qs[0].input[2]].dtype == np.uint8 else (-128, 127)
        vals = np.arange(256) + (0 if init[dq.input[2]].dtype == np.uint8 else -128)
        xd = ((vals - xz).astype(f32) * xs).astype(f32)
        quant = lambda v: np.clip(np.rint((v / ys).astype(f32)) + yz, lo, hi)
        t_ort = quant(s.run(None, {"x": xd})[0])
        t_cr = quant((1 / (1 + np.exp(-xd.astype(np.float64)))).astype(f32))
        t_f32 = quant(np.array([f32(1) / (f32(1) + f32(libm.expf(float(-v)))) for v in xd],
                               dtype=f32))
        total += 256
        for v in np.nonzero((t_ort != t_cr) | (t_ort != t_f32))[0]:
            found.append((n.name, int(vals[v]), int(t_ort[v]), int(t_cr[v]), int(t_f32[v])))
    return total, found


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("model_dir")
    p.add_argument("--kilnc", required=True)
    p.add_argument("--ref", choices=["opt", "noopt", "both"], default="both")
    p.add_argument("--pixels", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default="")
    a = p.parse_args()
    model = onnx.load(os.path.join(a.model_dir, "model.onnx"))
    inputs = inputs_of(a.model_dir)
    work = a.work or tempfile.mkdtemp(prefix="qdq_trace_")
    traced = exposed(model)
    for level in (["opt", "noopt"] if a.ref == "both" else [a.ref]):
        print(f"ORT {level}:")
        values = write_folder(os.path.join(work, f"trace_{level}"), traced, inputs, level)
        print(" trace (whole run):")
        report_trace(kiln_diffs(a.kilnc, os.path.join(work, f"trace_{level}"), a.threads))
        m, feeds = cut(traced, values)
        write_folder(os.path.join(work, f"local_{level}"), m, inputs + feeds, level)
        print(" local (each Q output from ORT's inputs):")
        report_trace(kiln_diffs(a.kilnc, os.path.join(work, f"local_{level}"), a.threads))
        if a.pixels:
            rels = sensitivity(model, inputs, level, a.pixels)
            print(f" sensitivity: one input pixel one step up moves ORT's output 0 by "
                  f"{', '.join(f'{r:.3g}' for r in rels)} x max|ref|")
    total, found = sigmoid_tables(model)
    print(f"sigmoid tables: {total} entries; where ORT's, the correctly rounded f32 "
          "sigmoid's and the f32 formula's differ:")
    for name, v, o, cr, f in found:
        print(f"  {name} at {v}: ORT {o}, correctly rounded {cr}, f32 formula {f}")
    print(f"(folders in {work})")


if __name__ == "__main__":
    main()
