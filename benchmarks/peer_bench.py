#!/usr/bin/env python3
# File: benchmarks/peer_bench.py — runs kiln's model zoo (or, with --corpus, the
# real-model corpus and the fp16/int8 zoo conversions of tools/corpus) through kiln
# and its peers (PyTorch eager, torch.compile/Inductor with max-autotune off and
# on, ONNX Runtime, OpenVINO): checks every runtime's outputs against the stored
# ones, times them
# interleaved (A B C D A B C D) at 1 and 2 threads, measures peak memory and the
# GFLOP/s of GEMM-bound models against a plain oneDNN matmul in the same run, and
# writes a markdown table, a PNG chart and raw JSON.
#
#   benchmarks/setup_venv.sh                       # peers, once
#   ~/.cache/kiln/bench-venv/bin/python benchmarks/peer_bench.py --prepare-only
#   ~/.cache/kiln/bench-venv/bin/python benchmarks/peer_bench.py
#   .../python benchmarks/peer_bench.py --quick --models mlp,resnet18,distilbert
#   .../python benchmarks/peer_bench.py --corpus --runtimes kiln,ort,ov_f32,ov
#
# Each model runs in its own worker process, so a crash or a hang costs one
# model only. benchmarks/README.md says what every column means.
import argparse
import collections
import datetime
import json
import math
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CACHE_ROOT = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "kiln")
DEFAULT_ZOO = os.path.join(CACHE_ROOT, "zoo")
DEFAULT_KILNC = "bazel-bin/tools/kilnc"
DEFAULT_PEAK = "bazel-bin/benchmarks/onednn_matmul_peak"
INDUCTOR_CACHE = os.path.join(CACHE_ROOT, "inductor-cache")
KILN_JIT_CACHE = os.path.join(CACHE_ROOT, "bench-jit")
HISTORY = os.path.join(CACHE_ROOT, "peer_bench_history.json")
GEMM_CACHE = os.path.join(CACHE_ROOT, "bench-gemms.json")
DEFAULT_CORPUS = os.path.join(CACHE_ROOT, "corpus")
# Zoo suites, then the corpus's (--corpus): real models by precision, and the
# zoo's fp16/int8 conversions.
SUITES = ("cnn", "transformer", "misc", "corpus-fp32", "corpus-fp16", "corpus-int8",
          "zoo-fp16", "zoo-int8")
ALL_RUNTIMES = ("eager", "inductor", "inductor_max", "ort", "ov_f32", "ov", "ort_int8",
                "ov_int8", "kiln", "kiln_bf16")
# kiln_bf16 is kiln compiled with --precision=bf16 (library calls in bf16 where
# oneDNN runs them natively; the same as kiln's f32 where it does not).
KILN_RUNTIMES = ("kiln", "kiln_bf16")
TORCH_RUNTIMES = ("eager", "inductor", "inductor_max")
# OpenVINO: ov_f32 with INFERENCE_PRECISION_HINT=f32, ov with the plugin's default
# precision (bf16 on CPUs with AVX512-BF16/AMX, f32 elsewhere). ort_int8/ov_int8
# run a zoo model's QDQ int8 conversion (tools/corpus/convert_zoo.py) in the zoo
# run; in --corpus runs the int8 models are rows of their own, so there the ORT and
# OpenVINO columns of those rows are the int8 figures.
OV_RUNTIMES = ("ov_f32", "ov", "ov_int8")
LABELS = {"eager": "torch eager", "inductor": "Inductor",
          "inductor_max": "Inductor max-autotune", "ort": "ORT", "kiln": "kiln",
          "kiln_bf16": "kiln bf16",
          "ov_f32": "OpenVINO f32", "ov": "OpenVINO default",
          "ort_int8": "ORT int8 (QDQ)", "ov_int8": "OpenVINO int8 (QDQ)",
          "onednn": "oneDNN matmul"}
PEERS = ("ort", "ov_f32", "ov", "inductor", "inductor_max", "eager")  # kiln vs each
# Tolerances (max|out - ref| <= X * max|ref|) where the model or the runtime's
# arithmetic is not fp32: fp16 keeps 11 significant bits, bf16 8, and an int8
# output is off by one quantization step (1/255 of its range), which can compound.
# bf16 through a deep CNN moves the logits by a few percent of their max:
# OpenVINO's own bf16 was 3.2e-2 to 6.4e-2 off on the zoo's CNNs
# (benchmarks/results/2026-12-02-bf16-avx512.md), so bf16's bound is 8e-2.
LOWP_TOLERANCE = {"fp16": 1e-2, "bf16": 8e-2, "int8": 1e-1}
GEMM_MODELS = "resnet50,vit_b_16,bert_base"
QUICK = {"rounds": 3, "min_time": 0.6, "warmup": 0.2, "kiln_warmup": 1,
         "gemm_min_time": 0.02}
FULL = {"rounds": 5, "min_time": 2.0, "warmup": 0.5, "kiln_warmup": 2,
        "gemm_min_time": 0.05}


# ------------------------------------------------------------------ helpers
def percentile(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def repo_path(p):
    return p if os.path.isabs(p) else os.path.join(REPO, p)


def parse_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def load_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def save_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hwm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def mib(b):
    return f"{b / 2**20:.0f}" if b else "—"


# ------------------------------------------------------------------ GEMM work
GEMM_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM")


def model_gemms(model_path, feeds):
    """The GEMM work of an ONNX model, from its graph: one (op, B, M, N, K,
    constant weights, FLOPs) per Conv/ConvTranspose/MatMul/Gemm/LSTM node (a
    conv as its implicit GEMM, groups as batches). Shapes come from ONNX shape
    inference with data propagation (on a copy without the large weights);
    those it leaves unknown (swin_t's attention) from an ONNX Runtime run that
    exposes them as outputs."""
    import numpy as np
    import onnx
    import onnx.shape_inference
    from onnx import TensorProto, helper
    m = onnx.load(model_path)
    g = m.graph
    const_names = {t.name for t in g.initializer}
    shapes = {t.name: list(t.dims) for t in g.initializer}
    light = onnx.ModelProto()
    light.CopyFrom(m)
    small = []
    for t in light.graph.initializer:
        if np.prod(t.dims) > 64:
            light.graph.input.append(helper.make_tensor_value_info(
                t.name, t.data_type, list(t.dims)))
        else:
            small.append(t)
    del light.graph.initializer[:]
    light.graph.initializer.extend(small)
    try:
        inf = onnx.shape_inference.infer_shapes(light, data_prop=True)
        for vi in list(inf.graph.input) + list(inf.graph.output) + \
                list(inf.graph.value_info):
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value")
                                            for d in tt.shape.dim):
                shapes.setdefault(vi.name, [d.dim_value for d in tt.shape.dim])
    except Exception:  # noqa: BLE001 — the ONNX Runtime fallback covers it
        pass
    nodes = [n for n in g.node if n.op_type in GEMM_OPS]
    missing = sorted({x for n in nodes for x in list(n.input[:3]) + [n.output[0]]
                      if x and x not in shapes})
    if missing:
        import onnxruntime as ort
        for name in missing:
            m.graph.output.append(helper.make_tensor_value_info(
                name, TensorProto.FLOAT, None))
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(m.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        for name, v in zip(missing, sess.run(missing, feeds)):
            shapes[name] = list(np.asarray(v).shape)

    def attr(node, name, default):
        for a in node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    out = []
    for n in nodes:
        if n.op_type in ("Conv", "ConvTranspose"):
            x, w, y = shapes[n.input[0]], shapes[n.input[1]], shapes[n.output[0]]
            grp = int(attr(n, "group", 1))
            if n.op_type == "Conv":
                flops = 2 * np.prod(y) * np.prod(w[1:])
                mnk = (y[0] * np.prod(y[2:]), w[0] // grp, np.prod(w[1:]))
            else:
                flops = 2 * np.prod(x) * np.prod(w[1:])
                mnk = (x[0] * np.prod(x[2:]), np.prod(w[1:]), w[0] // grp)
            out.append([n.op_type, grp, *map(int, mnk), n.input[1] in const_names,
                        float(flops)])
        elif n.op_type == "MatMul":
            a, b, y = shapes[n.input[0]], shapes[n.input[1]], shapes[n.output[0]]
            const_w = n.input[1] in const_names and len(b) == 2
            if const_w or len(b) == 1 or len(y) < 2:
                bm = (1, int(np.prod(y[:-1])) if len(y) > 1 else 1)
            else:
                bm = (int(np.prod(y[:-2])), int(y[-2]))
            n_ = int(y[-1]) if len(b) > 1 else 1
            out.append(["MatMul", *bm, n_, int(a[-1]), const_w,
                        float(2 * np.prod(y) * a[-1])])
        elif n.op_type == "Gemm":
            b, y = shapes[n.input[1]], shapes[n.output[0]]
            k = b[1] if attr(n, "transB", 0) else b[0]
            out.append(["Gemm", 1, int(y[0]), int(y[1]), int(k),
                        n.input[1] in const_names, float(2 * np.prod(y) * k)])
        else:  # LSTM: per step, [batch, input + hidden] x [input + hidden, 4h]
            x, w, r = (shapes[n.input[i]] for i in range(3))
            dirs, four_h, inp = w
            out.append(["LSTM", int(x[0] * dirs), int(x[1]), int(four_h),
                        int(inp + r[2]), True,
                        float(2 * x[0] * x[1] * dirs * four_h * (inp + r[2]))])
    return out


def gemm_summary(model_dir, feeds_fn):
    """Cached model_gemms(): total GFLOP and FLOP-weighted GEMM shapes."""
    path = os.path.join(model_dir, "model.onnx")
    st = os.stat(path)
    key = f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    cache = load_json(GEMM_CACHE, {})
    if key not in cache:
        t0 = time.perf_counter()
        gemms = model_gemms(path, feeds_fn())
        shapes = collections.Counter()
        for op, b, m, n, k, const_w, flops in gemms:
            if op == "LSTM":
                continue
            shapes[(b, m, n, k, bool(const_w))] += flops
        cache = load_json(GEMM_CACHE, {})
        cache[key] = {"gflop": sum(x[-1] for x in gemms) / 1e9,
                      "shapes": [[*s, f] for s, f in shapes.most_common()],
                      "nodes": len(gemms),
                      "seconds": round(time.perf_counter() - t0, 1)}
        save_json(GEMM_CACHE, cache)
    return cache[key]


def reference_shapes(summary, coverage=0.97, max_shapes=16):
    """The GEMM shapes that carry `coverage` of a model's GEMM FLOPs (at most
    max_shapes), as onednn_matmul_peak specs with their FLOP weights."""
    total = sum(s[-1] for s in summary["shapes"]) or 1.0
    picked, acc = [], 0.0
    for b, m, n, k, const_w, flops in summary["shapes"]:
        if acc >= coverage * total or len(picked) >= max_shapes:
            break
        if n < 8 and k < 64:  # depthwise-like: not a GEMM a matmul models
            continue
        spec = (f"{b}x" if b > 1 else "") + f"{m}x{n}x{k}" + ("" if const_w else ":plain")
        picked.append((spec, flops))
        acc += flops
    return picked, acc / total


# ------------------------------------------------------------------ runtimes
class Runtime:
    """One way to run a model; the worker drives all of them the same way."""
    name = ""
    per_iteration = True  # False: each batch is one external run (kiln, oneDNN)

    def prepare(self, threads):
        """Builds/compiles for `threads`; returns extra info (setup_s, ...)."""
        raise NotImplementedError

    def check(self, refs, max_rel):
        """(ok, worst relative error, note) against the stored outputs."""
        return compare(self.outputs(), refs, max_rel)

    def outputs(self):
        raise NotImplementedError

    def batch(self, seconds):
        """Runs for about `seconds` (at least once); (samples in ms, info)."""
        raise NotImplementedError

    def close(self):
        pass


class TorchRuntime(Runtime):
    def __init__(self, torch, model, inputs, mode=None, compiled=False):
        self.torch = torch
        self.model = model
        self.args = tuple(torch.from_numpy(a.copy()) for a in inputs)
        self.mode = mode
        self.compiled = compiled
        self.fn = model

    def prepare(self, threads):
        torch = self.torch
        torch.set_num_threads(threads)
        if not self.compiled:
            return {}
        torch._dynamo.reset()
        kw = {"backend": "inductor"}
        if self.mode:
            kw["mode"] = self.mode
        self.fn = torch.compile(self.model, **kw)
        t0 = time.perf_counter()
        with torch.no_grad():
            self.fn(*self.args)
        return {"setup_s": round(time.perf_counter() - t0, 2)}

    def outputs(self):
        with self.torch.no_grad():
            out = self.fn(*self.args)
        if isinstance(out, self.torch.Tensor):
            out = (out,)
        return [o.detach().numpy() for o in out]

    def batch(self, seconds):
        with self.torch.no_grad():
            pc = time.perf_counter
            fn, args = self.fn, self.args
            samples = []
            end = pc() + seconds
            while not samples or pc() < end:
                t0 = pc()
                fn(*args)
                samples.append((pc() - t0) * 1e3)
        return samples, {}

    def close(self):
        self.fn = None
        if self.compiled:
            self.torch._dynamo.reset()


class OrtRuntime(Runtime):
    def __init__(self, model_path, feeds):
        import onnxruntime as ort
        self.ort = ort
        self.path = model_path
        self.feeds = feeds
        self.sess = None

    def prepare(self, threads):
        self.sess = None
        t0 = time.perf_counter()
        self.sess = ort_session(self.ort, self.path, threads)
        return {"setup_s": round(time.perf_counter() - t0, 2)}

    def outputs(self):
        return self.sess.run(None, self.feeds)

    def batch(self, seconds):
        pc = time.perf_counter
        run, feeds = self.sess.run, self.feeds
        samples = []
        end = pc() + seconds
        while not samples or pc() < end:
            t0 = pc()
            run(None, feeds)
            samples.append((pc() - t0) * 1e3)
        return samples, {}

    def close(self):
        self.sess = None


class OvRuntime(Runtime):
    """OpenVINO's CPU plugin: ov.Core().compile_model(path, "CPU", config) with
    PERFORMANCE_HINT=LATENCY, NUM_STREAMS=1, INFERENCE_NUM_THREADS=threads and,
    when `precision` is given, INFERENCE_PRECISION_HINT; one infer request."""

    def __init__(self, model_path, feeds, precision=None, refs=None):
        import openvino as ov
        self.core = ov.Core()
        self.path = model_path
        self.feeds = feeds
        self.precision = precision
        self.refs = refs  # its own reference outputs (ov_int8), else the row's
        self.compiled = self.req = None

    def prepare(self, threads):
        self.compiled = self.req = None
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1",
                  "INFERENCE_NUM_THREADS": str(threads)}
        if self.precision:
            config["INFERENCE_PRECISION_HINT"] = self.precision
        t0 = time.perf_counter()
        model = self.core.read_model(self.path)
        # Dynamic dims are bound to the data's shapes, as a user of a dynamic
        # model does (ORT and kiln see the same shapes).
        dynamic = {i.get_any_name(): list(self.feeds[i.get_any_name()].shape)
                   for i in model.inputs if i.get_partial_shape().is_dynamic
                   and i.get_any_name() in self.feeds}
        if dynamic:
            model.reshape(dynamic)
        self.compiled = self.core.compile_model(model, "CPU", config)
        self.req = self.compiled.create_infer_request()
        setup = round(time.perf_counter() - t0, 2)
        # str() of an ov.Type reads e.g. "<Type: 'float32'>" or "<Type: 'bfloat16'>".
        t = str(self.compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
        prec = "bf16" if ("bf16" in t or "bfloat16" in t) else \
            "f16" if ("f16" in t or "float16" in t) else "f32" if "32" in t else t
        return {"setup_s": setup, "inference_precision": prec,
                "reshaped": bool(dynamic)}

    def check(self, refs, max_rel):
        return compare(self.outputs(), self.refs or refs, max_rel)

    def outputs(self):
        res = self.req.infer(self.feeds)
        return [res[o] for o in self.compiled.outputs]

    def batch(self, seconds):
        pc = time.perf_counter
        infer, feeds = self.req.infer, self.feeds
        samples = []
        end = pc() + seconds
        while not samples or pc() < end:
            t0 = pc()
            infer(feeds)
            samples.append((pc() - t0) * 1e3)
        return samples, {}

    def close(self):
        self.compiled = self.req = None


class OrtInt8Runtime(OrtRuntime):
    """ORT on another file (a zoo model's QDQ conversion), held to that file's
    own reference outputs."""

    def __init__(self, model_path, feeds, refs):
        super().__init__(model_path, feeds)
        self.refs = refs

    def check(self, refs, max_rel):
        return compare(self.outputs(), self.refs, max_rel)


def ort_session(ort, path, threads, arena=True):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_cpu_mem_arena = arena
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def reset_peak_rss():
    """Returns free heap to the OS and resets VmHWM to the current RSS."""
    import ctypes
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:  # Linux >= 4.0
        f.write("5")


def ort_memory_probe(model_dir, threads, iterations=3):
    """Run in a fresh process: ORT's peak RSS with its default settings over
    session creation and runs; then, in a session without the CPU arena (which
    would keep earlier freed memory resident) and with glibc's mmap threshold
    fixed (big buffers are mapped and unmapped), the growth from the settled
    session's RSS to the peak of its runs: its activations and workspaces."""
    import ctypes
    import gc
    import onnxruntime as ort
    inputs, _ = load_test_data(model_dir)
    feeds = dict(inputs)
    path = os.path.join(model_dir, "model.onnx")
    base = rss_bytes()
    sess = ort_session(ort, path, threads)
    after_session = rss_bytes()
    for _ in range(iterations):
        sess.run(None, feeds)
    peak = hwm_bytes()
    del sess
    gc.collect()
    ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    sess = ort_session(ort, path, threads, arena=False)
    sess.run(None, feeds)  # one-time lazy allocations stay out of the growth
    reset_peak_rss()
    settled = rss_bytes()
    for _ in range(iterations):
        sess.run(None, feeds)
    return {"peak_rss_bytes": peak, "rss_before_session_bytes": base,
            "rss_after_session_bytes": after_session,
            "run_growth_bytes": max(0, hwm_bytes() - settled),
            "threads": threads, "iterations": iterations}


# kilnc reports getrusage's max RSS, which Linux keeps across execve: started
# straight from this (large) Python process it would report ours. A shell that
# forks first gives it a fresh count.
FRESH_RSS = ["/bin/sh", "-c", '"$@"; exit $?', "sh"]


class KilnRuntime(Runtime):
    """kiln through its own runner: every batch is one `kilnc bench MODEL
    --json --threads=N --min-time=T` run (it compiles from the warm JIT cache,
    warms up, times itself); its median is one round's median."""
    per_iteration = False

    def __init__(self, kilnc, model_dir, args, inputs=(), precision="f32"):
        self.kilnc = kilnc
        self.dir = model_dir
        self.args = args
        self.threads = 1
        self.precision = precision
        # kilnc bench takes the model alone: it is fed the stored inputs (the
        # ones ORT and OpenVINO run; silero's sample rate must be 16000) and its
        # dynamic dims bound to their shapes (kilnc check reads the data set).
        data = os.path.join(model_dir, "test_data_set_0")
        self.shapes = [f"--shape={n}={'x'.join(map(str, a.shape))}"
                       for n, a in inputs if a.ndim] + \
            [f"--input={n}={os.path.join(data, f'input_{k}.pb')}"
             for k, (n, _) in enumerate(inputs)]

    def _common(self):
        return [f"--threads={self.threads}", f"--cache-dir={self.args.kiln_cache}",
                f"--precision={self.precision}"]

    def prepare(self, threads):
        self.threads = threads
        # The tolerance of a bf16 compile is bf16's, as for OpenVINO's default.
        return {"inference_precision": self.precision}

    def check(self, refs, max_rel, data_dir=None):
        cmd = [self.kilnc, "check", data_dir or self.dir, f"--max-rel={max_rel}",
               "--verbose"] + \
            self._common() + shlex.split(self.args.kiln_check_args)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                           timeout=self.args.model_timeout)
        text = p.stdout + p.stderr
        self.check_s = round(time.perf_counter() - t0, 1)
        rels = [float(x) for x in re.findall(
            r"rel_to_max\s+([0-9.eE+-]+|inf|nan)", text)]
        worst = max(rels) if rels else None
        if p.returncode != 0:
            tail = " | ".join(text.strip().splitlines()[-4:])
            return False, worst if worst is not None else float("inf"), \
                f"kilnc check exit {p.returncode}: {tail}"[:500]
        return True, worst, ""

    def batch(self, seconds):
        cmd = [self.kilnc, "bench", os.path.join(self.dir, "model.onnx"), "--json",
               f"--min-time={seconds:g}", "--min-iterations=1",
               f"--warmup={self.args.kiln_warmup}"] + self._common() + self.shapes + \
            shlex.split(self.args.kiln_bench_args)
        t0 = time.perf_counter()
        p = subprocess.run(FRESH_RSS + cmd, cwd=REPO, capture_output=True, text=True,
                           timeout=self.args.model_timeout)
        res = parse_json_line(p.stdout)
        if p.returncode != 0 or res is None or "median_ms" not in res:
            raise RuntimeError(f"kilnc bench failed (exit {p.returncode}): "
                               + (p.stdout + p.stderr).strip()[-400:])
        res["wall_s"] = round(time.perf_counter() - t0, 2)
        return [float(res["median_ms"])], res


class OneDnnPeak(Runtime):
    """onednn_matmul_peak at a model's GEMM shapes: each batch is one run over
    all shapes; its sample is the FLOP-weighted GFLOP/s (total FLOPs over the
    sum of each shape's FLOPs / its GFLOP/s)."""
    per_iteration = False

    def __init__(self, binary, shapes, min_time):
        self.binary = binary
        self.shapes = shapes  # [(spec, flops)]
        self.min_time = min_time
        self.threads = 1

    def prepare(self, threads):
        self.threads = threads
        return {}

    def batch(self, seconds):
        specs = [s for s, _ in self.shapes] + ["1024x1024x1024"]
        cmd = [self.binary, "--shapes=" + ",".join(specs), f"--threads={self.threads}",
               f"--benchmark_min_time={self.min_time:g}", "--benchmark_format=json"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"onednn_matmul_peak exit {p.returncode}: "
                               + p.stderr.strip()[-300:])
        rates = {}
        for b in json.loads(p.stdout)["benchmarks"]:
            spec = b["name"].split("/")[1]
            rates[spec] = b["flops"] / 1e9
        total = sum(f for _, f in self.shapes)
        weighted = total / sum(f / rates[s] for s, f in self.shapes)
        return [weighted], {"gflops_by_shape": rates, "square_gflops":
                            rates["1024x1024x1024"]}


# ------------------------------------------------------------------ worker
def load_test_data(model_dir):
    import onnx
    from onnx import numpy_helper
    data = os.path.join(model_dir, "test_data_set_0")

    def read(prefix):
        out, i = [], 0
        while os.path.exists(os.path.join(data, f"{prefix}_{i}.pb")):
            t = onnx.TensorProto()
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            out.append((t.name, numpy_helper.to_array(t)))
            i += 1
        return out
    return read("input"), read("output")


def compare(outs, refs, max_rel):
    """Largest |out - ref| over max|ref|, per output; (ok, worst rel, note)."""
    import numpy as np
    if len(outs) != len(refs):
        return False, float("inf"), f"{len(outs)} outputs, expected {len(refs)}"
    worst = 0.0
    for k, (o, (_, r)) in enumerate(zip(outs, refs)):
        o = np.asarray(o)
        if o.shape != r.shape:
            return False, float("inf"), f"output {k} shape {o.shape}, expected {r.shape}"
        if o.dtype.kind in "iub" or r.dtype.kind in "iub":
            if not np.array_equal(o, r):
                return False, float("inf"), f"output {k} differs (integer)"
            continue
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        err = float(np.max(np.abs(o.astype(np.float64) - r))) if r.size else 0.0
        rel = err / scale if scale > 0 else err
        if not math.isfinite(rel):
            rel = float("inf")
        worst = max(worst, rel)
    return worst <= max_rel, worst, ""


def build_torch_model(torch, entry):
    """The zoo's PyTorch module, rebuilt as tools/zoo/export_zoo.py builds it:
    its ZOO factory, the seed from zoo.json, its weight calibration."""
    sys.path.insert(0, os.path.join(REPO, "tools", "zoo"))
    import export_zoo as ez
    _suite, make_model, make_inputs, _opset, _outs = ez.ZOO[entry["name"]]
    torch.manual_seed(entry["seed"])
    model = make_model()
    model.eval()
    ez.reinit_zero_weights(model)
    ez.calibrate_batchnorm(model, make_inputs)
    ez.perturb_layernorm(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def debian_weights(args, entry):
    """The module's state_dict as Debian's PyTorch 1.13 (which exported the
    zoo) builds it, cached outside git; for models whose torchvision init
    changed since, so that torch 2.x seeded the same way gets other weights."""
    path = os.path.join(CACHE_ROOT, "bench-weights", f"{entry['name']}-{entry['seed']}.pt")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        subprocess.run([args.debian_python, os.path.abspath(__file__), "--zoo", args.zoo,
                        "--dump-state-dict", entry["name"], "--worker-out", path + ".tmp"],
                       check=True, env=env, timeout=1800)
        os.replace(path + ".tmp", path)
    return path


def dump_state_dict(args):
    import torch
    torch.set_num_threads(1)
    zoo = json.load(open(os.path.join(args.zoo, "zoo.json")))
    entry = next(m for m in zoo["models"] if m["name"] == args.dump_state_dict)
    model = build_torch_model(torch, entry)
    torch.save(model.state_dict(), args.worker_out)
    return 0


def torch_module(args, entry, refs, input_arrays, result):
    """The eval-mode module whose eager outputs match the stored ones."""
    import torch
    model = build_torch_model(torch, entry)
    torch.set_num_threads(args.thread_list[0])
    probe = TorchRuntime(torch, model, input_arrays)
    ok, rel, _ = compare(probe.outputs(), refs, args.max_rel)
    if not ok:
        model.load_state_dict(torch.load(debian_weights(args, entry), weights_only=True))
        _, rel2, _ = compare(probe.outputs(), refs, args.max_rel)
        result["notes"].append(
            f"torch {torch.__version__} seeded as the exporter gives other weights (max "
            f"rel err {rel:.1e}); took the weights from Debian's torch 1.13 "
            f"({args.debian_python}): max rel err now {rel2:.1e}")
    return model


def corpus_entries(args):
    """The models of tools/corpus (corpus.json: real models; converted.json: the
    zoo's fp16/int8 conversions) as benchmark entries."""
    out = []
    idx = load_json(os.path.join(args.corpus_dir, "corpus.json"), {"models": []})
    for m in idx["models"]:
        if m.get("status") != "ok":
            continue
        prec = "int8" if m["precision"].startswith("int8") else m["precision"]
        out.append({"name": m["name"], "suite": f"corpus-{prec}", "precision": prec,
                    "dir": os.path.join(args.corpus_dir, "models", m["name"]),
                    "model_bytes": m.get("bytes"), "max_rel": m.get("max_rel"),
                    "num_nodes": sum((m.get("ops") or {}).values()) or 100})
    conv = load_json(os.path.join(args.corpus_dir, "converted", "converted.json"),
                     {"models": []})
    for m in conv["models"]:
        if m.get("status") != "ok":
            continue
        prec = "fp16" if m["kind"] == "fp16" else "int8"
        out.append({"name": m["name"], "suite": f"zoo-{prec}", "precision": prec,
                    "dir": os.path.join(args.corpus_dir, "converted", m["name"]),
                    "model_bytes": m.get("model_bytes"),
                    "num_nodes": sum((m.get("ops") or {}).values()) or 100})
    return out


def bench_entries(args):
    """The zoo's entries (zoo.json), or with --corpus the corpus's."""
    if args.corpus:
        return corpus_entries(args)
    zoo = json.load(open(os.path.join(args.zoo, "zoo.json")))
    for m in zoo["models"]:
        m.setdefault("dir", os.path.join(args.zoo, m["name"]))
        m.setdefault("precision", "fp32")
    return zoo["models"]


def tolerance(args, entry, runtime, info):
    """The max-rel tolerance for one runtime on one model: --max-rel for fp32
    arithmetic on an fp32 model (or the corpus manifest's own "max_rel" for the
    model, which states why), else LOWP_TOLERANCE's (the looser of the model's
    precision and the precision the runtime computed in)."""
    tols = [entry.get("max_rel") or args.max_rel]
    if entry.get("precision", "fp32") != "fp32":
        tols.append(LOWP_TOLERANCE[entry["precision"]])
    if runtime in ("ort_int8", "ov_int8"):
        tols.append(LOWP_TOLERANCE["int8"])
    prec = info.get("inference_precision", "f32")
    if prec in ("bf16", "f16"):
        tols.append(LOWP_TOLERANCE["bf16" if prec == "bf16" else "fp16"])
    return max(tols)


def run_worker(args, name):
    entry = next(m for m in bench_entries(args) if m["name"] == name)
    model_dir = entry["dir"]
    inputs, refs = load_test_data(model_dir)
    input_arrays = [a for _, a in inputs]
    feeds = dict(inputs)
    runtimes = args.runtime_list
    result = {"name": name, "suite": entry["suite"], "gflops": entry.get("gflops"),
              "load_start": os.getloadavg()[0], "threads": {}, "notes": []}
    try:
        summary = gemm_summary(model_dir, lambda: feeds)
        result["gflops"] = round(summary["gflop"], 3)
        result["gemm_shapes"] = summary["shapes"][:24]
    except Exception as e:  # noqa: BLE001 — the FLOP count is then zoo.json's
        summary = None
        result["notes"].append(f"GEMM shapes from the graph failed: {type(e).__name__}: {e}")
    rts, errors = {}, {}
    if args.corpus:
        for r in runtimes:
            if r in TORCH_RUNTIMES:
                errors[r] = "skipped (no PyTorch module for corpus models)"
            elif r in ("ort_int8", "ov_int8"):
                errors[r] = "skipped (--corpus: the int8 models are rows of their own)"
    elif any(r in TORCH_RUNTIMES for r in runtimes):
        import torch
        torch.set_num_interop_threads(1)
        import torch._inductor.config as icfg
        icfg.freezing = args.freezing
        try:
            model = torch_module(args, entry, refs, input_arrays, result)
        except Exception as e:  # noqa: BLE001 — recorded per runtime
            for r in runtimes:
                if r in TORCH_RUNTIMES:
                    errors[r] = f"building the module: {type(e).__name__}: {e}"
        else:
            for r in runtimes:
                if r == "eager":
                    rts[r] = TorchRuntime(torch, model, input_arrays)
                elif r == "inductor":
                    rts[r] = TorchRuntime(torch, model, input_arrays, compiled=True)
                elif r == "inductor_max":
                    if args.max_autotune_models and name not in args.max_autotune_models:
                        errors[r] = "skipped (not in --max-autotune-models)"
                        continue
                    rts[r] = TorchRuntime(torch, model, input_arrays,
                                          mode="max-autotune", compiled=True)
    if "ort" in runtimes:
        rts["ort"] = OrtRuntime(os.path.join(model_dir, "model.onnx"), feeds)
    for r, prec in (("ov_f32", "f32"), ("ov", None)):
        if r in runtimes:
            try:
                rts[r] = OvRuntime(os.path.join(model_dir, "model.onnx"), feeds, prec)
            except ImportError as e:
                errors[r] = f"no OpenVINO ({e}): benchmarks/setup_venv.sh installs it"
    if not args.corpus and ("ort_int8" in runtimes or "ov_int8" in runtimes):
        qdir = os.path.join(args.corpus_dir, "converted", f"{name}.qdq")
        if os.path.exists(os.path.join(qdir, "model.onnx")):
            qin, qrefs = load_test_data(qdir)
            qpath = os.path.join(qdir, "model.onnx")
            if "ort_int8" in runtimes:
                rts["ort_int8"] = OrtInt8Runtime(qpath, dict(qin), qrefs)
            if "ov_int8" in runtimes:
                try:
                    rts["ov_int8"] = OvRuntime(qpath, dict(qin), None, qrefs)
                except ImportError as e:
                    errors["ov_int8"] = f"no OpenVINO ({e})"
        else:
            for r in ("ort_int8", "ov_int8"):
                if r in runtimes:
                    errors[r] = (f"skipped (no {qdir}: tools/corpus/convert_zoo.py "
                                 "makes it)")
    for r, prec in (("kiln", "f32"), ("kiln_bf16", "bf16")):
        if r not in runtimes:
            continue
        if os.access(args.kilnc_path, os.X_OK):
            # The stored inputs and their shapes, for zoo and corpus models
            # alike: a zoo model with dynamic dims (distilbert_dynseq) must
            # run the shapes ORT and OpenVINO run, not dims bound to 1.
            rts[r] = KilnRuntime(args.kilnc_path, model_dir, args, inputs, prec)
        else:
            errors[r] = (f"no kilnc at {args.kilnc_path} (build it: bazel build "
                         "-c opt //tools:kilnc, or pass --kilnc PATH)")
    gemm_ref = None
    if name in args.gemm_model_list and summary and not args.prepare_only:
        if os.access(args.onednn_peak_path, os.X_OK):
            shapes, coverage = reference_shapes(summary)
            result["gemm_reference"] = {"shapes": shapes, "coverage": round(coverage, 3)}
            gemm_ref = OneDnnPeak(args.onednn_peak_path, shapes, args.gemm_min_time)
        else:
            result["notes"].append(
                f"no oneDNN matmul reference: {args.onednn_peak_path} missing (bazel "
                "build -c opt //benchmarks:onednn_matmul_peak, or --onednn-peak PATH)")
    order = [r for r in runtimes if r in rts]

    for threads in args.thread_list:
        tres = {r: {"status": "skipped" if e.startswith("skipped") else "error",
                    "note": e} for r, e in errors.items()}
        live = []
        for r in order:
            rt = rts[r]
            info = {"status": "ok"}
            t0 = time.perf_counter()
            try:
                info.update(rt.prepare(threads))
                info["tolerance"] = tolerance(args, entry, r, info)
                ok, rel, note = rt.check(refs, info["tolerance"])
                alt = os.path.join(model_dir, "ort-noopt")
                if not ok and entry.get("precision") == "int8" and \
                        os.path.exists(os.path.join(alt, "test_data_set_0")):
                    # An int8 model has two legitimate references: ORT's fused
                    # int8 kernels, and ORT without graph optimizations (Q/DQ as
                    # the ONNX spec writes them; check_corpus.py writes it).
                    _, alt_refs = load_test_data(alt)
                    ok2, rel2, note2 = (rt.check(alt_refs, info["tolerance"], alt)
                                        if r in KILN_RUNTIMES else
                                        compare(rt.outputs(), alt_refs, info["tolerance"]))
                    info["max_rel_err_fused"] = rel
                    info["max_rel_err_unfused"] = rel2
                    if ok2:
                        ok, rel, note = ok2, rel2, ""
                        info["reference"] = "ORT without graph optimizations"
                info["max_rel_err"] = rel
                if not ok:
                    info.update(status="wrong", note=note or f"max rel err {rel:.2e}")
            except Exception as e:  # noqa: BLE001 — reported in the table
                info.update(status="error", note=f"{type(e).__name__}: {e}"[:600])
            info["prepare_check_s"] = round(time.perf_counter() - t0, 1)
            tres[r] = info
            if info["status"] == "ok":
                live.append(r)
            rel = info.get("max_rel_err")
            print(f"  {name} t{threads} {r}: {info['status']}"
                  + (f" max rel err {rel:.1e}" if isinstance(rel, float) else "")
                  + (f" ({info.get('note')})" if info.get("note") else "")
                  + (f", setup {info['setup_s']} s" if "setup_s" in info else ""),
                  file=sys.stderr, flush=True)
        if args.prepare_only:
            for r in KILN_RUNTIMES:  # one short round: its wall time goes to the history
                if r not in live:
                    continue
                try:
                    tres[r]["wall_s"] = rts[r].batch(0.05)[1]["wall_s"]
                except Exception as e:  # noqa: BLE001
                    tres[r].update(status="error", note=str(e)[:400])
            result["threads"][str(threads)] = tres
            continue

        if "ort" in live and args.memory:
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__),
                                    "--ort-memory", model_dir, "--threads", str(threads),
                                    "--zoo", args.zoo],
                                   capture_output=True, text=True, timeout=1800)
                mem = parse_json_line(p.stdout)
                if mem is None:
                    raise RuntimeError(p.stderr.strip()[-300:])
                tres["ort"]["memory"] = mem
            except Exception as e:  # noqa: BLE001
                result["notes"].append(f"ORT memory probe t{threads}: {e}"[:300])

        rotation = list(live)
        if gemm_ref is not None:
            gemm_ref.prepare(threads)
            rotation.append("onednn")
            tres["onednn"] = {"status": "ok"}
        runners = dict(rts, onednn=gemm_ref)

        # Warm-up; kiln and oneDNN warm up inside their own runs.
        for r in list(rotation):
            rt = runners[r]
            try:
                if rt.per_iteration:
                    rt.batch(args.warmup)
            except Exception as e:  # noqa: BLE001
                tres[r].update(status="error", note=f"warm-up: {type(e).__name__}: {e}"[:400])
                rotation.remove(r)

        samples = {r: [] for r in rotation}
        round_medians = {r: [] for r in rotation}
        extra = {r: [] for r in rotation}
        for _ in range(args.rounds):
            for r in list(rotation):
                try:
                    s, info = runners[r].batch(args.round_time)
                except Exception as e:  # noqa: BLE001
                    tres[r].update(status="error", note=f"{type(e).__name__}: {e}"[:400])
                    rotation.remove(r)
                    continue
                samples[r] += s
                round_medians[r].append(percentile(s, 0.5))
                if info:
                    extra[r].append(info)
        for r in rotation:
            t = tres[r]
            if r == "onednn":
                t.update(gflops=percentile(round_medians[r], 0.5),
                         rounds_gflops=[round(x, 2) for x in round_medians[r]],
                         square_gflops=percentile([x["square_gflops"] for x in extra[r]], 0.5),
                         gflops_by_shape=extra[r][-1]["gflops_by_shape"])
                print(f"  {name} t{threads} oneDNN matmul at its GEMM shapes: "
                      f"{t['gflops']:.1f} GFLOP/s (1024^3: {t['square_gflops']:.1f})",
                      file=sys.stderr, flush=True)
                continue
            s = samples[r]
            t.update(median_ms=percentile(round_medians[r], 0.5),
                     p90_ms=percentile(s, 0.9), min_ms=min(s), samples=len(s),
                     round_medians_ms=[round(x, 4) for x in round_medians[r]])
            if r in KILN_RUNTIMES:
                ex = extra[r]
                t["p90_ms"] = percentile([float(x["p90_ms"]) for x in ex], 0.5)
                t["samples"] = sum(int(x.get("iterations", 0)) for x in ex)
                for key in ("peak_rss_bytes", "arena_bytes", "prepacked_bytes",
                            "compile_warm_ms", "wall_s"):
                    vals = [float(x[key]) for x in ex if key in x]
                    if vals:
                        t[key] = max(vals) if key == "peak_rss_bytes" else percentile(vals, 0.5)
                t["compile_ms"] = float(ex[0].get("compile_ms", 0))
                t["compile_cache_hit"] = ex[0].get("compile_cache_hit")
                t["kilnc"] = ex[-1]
            print(f"  {name} t{threads} {r}: median {t['median_ms']:.3f} ms, "
                  f"p90 {t['p90_ms']:.3f} ms ({t['samples']} samples)",
                  file=sys.stderr, flush=True)
        result["threads"][str(threads)] = tres
    for rt in rts.values():
        rt.close()
    result["load_end"] = os.getloadavg()[0]
    return result


# ------------------------------------------------------------------ estimate
def estimate_model(entry, args, history):
    """Expected seconds of one model's worker: what each step took in earlier
    runs on this machine (the history) where known, else rough guesses for a
    quiet 2-core machine from the model's size (a loaded one takes ~2x)."""
    name, mb = entry["name"], (entry.get("model_bytes") or 1e7) / 1e6
    nodes = entry.get("num_nodes", 100)
    h = history.get("models", {}).get(name, {})
    total = 4 + mb / 100  # interpreter, torch import, module build
    for T in args.thread_list:
        hs = h.get(str(T), {})
        for r in args.runtime_list:
            if r == "inductor_max" and args.max_autotune_models and \
                    name not in args.max_autotune_models:
                continue
            if r in ("inductor", "inductor_max"):
                e = hs.get(r, {})
                plain = hs.get("inductor", {}).get("cold_s", 15 + 0.12 * min(nodes, 800))
                cold = e.get("cold_s", plain * (3 if r == "inductor_max" else 1))
                # With freezing, Inductor's FX graph cache is bypassed ("mkldnn
                # tensors unpickleable"): only C++ builds and autotuning are
                # cached, so a warm compile redoes tracing, freezing, lowering.
                total += e["warm_s"] if "warm_s" in e else \
                    plain * (0.6 if args.freezing else 0.25) if e else cold
            elif r in KILN_RUNTIMES:
                total += hs.get(r, {}).get("prepare_check_s", 1 + mb / 80)
            elif r in ("ort", "ort_int8") or r in OV_RUNTIMES:
                total += hs.get(r, {}).get("prepare_check_s", 0.5 + mb / 150)
            else:
                total += 0.5
            if args.prepare_only:
                continue
            if r in KILN_RUNTIMES:
                wall = hs.get(r, {}).get("round_wall_s",
                                              2 * (0.3 + mb / 150) + args.round_time)
                total += args.rounds * wall
            else:
                total += args.min_time + args.warmup
        if not args.prepare_only:
            if "ort" in args.runtime_list and args.memory:
                total += 3 + mb / 80
            if name in args.gemm_model_list:
                total += args.rounds * (0.5 + 17 * max(args.gemm_min_time, 0.06))
    return total


def update_history(history, res, args):
    h = history.setdefault("models", {}).setdefault(res["name"], {})
    for T, tr in res.get("threads", {}).items():
        hs = h.setdefault(T, {})
        for r, t in tr.items():
            if r == "onednn" or "prepare_check_s" not in t:
                continue
            e = hs.setdefault(r, {})
            if r in ("inductor", "inductor_max"):  # the first compile fills the cache
                e["warm_s" if "cold_s" in e else "cold_s"] = t["prepare_check_s"]
                continue
            e["prepare_check_s"] = t["prepare_check_s"]
            if r in KILN_RUNTIMES and "wall_s" in t:
                e["round_wall_s"] = t["wall_s"]


# ------------------------------------------------------------------ report
def machine_info():
    info = {"host": socket.gethostname(), "kernel": platform.release(),
            "python": platform.python_version(), "cores": os.cpu_count()}
    try:
        cpu = open("/proc/cpuinfo").read()
        for line in cpu.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in cpu.splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                info["simd_flags"] = [f for f in flags if f.startswith(
                    ("avx", "fma", "f16c", "amx", "sse4"))]
                break
        mem = open("/proc/meminfo").readline().split()
        info["mem_gib"] = round(int(mem[1]) / 2**20, 1)
    except OSError:
        pass
    return info


def versions(args):
    v = {}
    for mod in ("torch", "torchvision", "onnxruntime", "openvino", "onnx", "numpy",
                "matplotlib"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            v[mod] = "missing"
    try:
        v["kiln_git"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
            text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        if dirty:
            v["kiln_git"] += " (working tree has uncommitted changes)"
    except OSError:
        pass
    v["kilnc"] = args.kilnc_path
    v["onednn_matmul_peak"] = args.onednn_peak_path
    return v


def fmt_cell(t):
    if t is None:
        return "—"
    st = t.get("status")
    if st == "ok" and "median_ms" in t:
        return f"{t['median_ms']:.2f} ({t['p90_ms']:.2f})"
    if st == "wrong":
        rel = t.get("max_rel_err")
        return f"WRONG ({rel:.1e})" if isinstance(rel, float) and math.isfinite(rel) \
            else "WRONG"
    if st == "skipped":
        return "skip"
    return st.upper() if st else "—"


def ratio(tr, num, den):
    a, b = tr.get(num), tr.get(den)
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return None
    if "median_ms" not in a or "median_ms" not in b:
        return None
    return a["median_ms"] / b["median_ms"]


def present_suites(results):
    """The suites that have models in this run, in SUITES order."""
    have = {r["suite"] for r in results}
    return tuple(s for s in SUITES if s in have)


def suite_geomeans(results, T, num, den):
    out = {}
    for suite in SUITES + ("all",):
        xs = [ratio(res.get("threads", {}).get(str(T), {}), num, den)
              for res in results if suite == "all" or res["suite"] == suite]
        xs = [x for x in xs if x]
        out[suite] = (geomean(xs), len(xs))
    return out


def targets(meta, results):
    """The issue's targets, each (text, verdict, detail)."""
    rts = meta["runtimes"]
    out = []
    if "kiln_bf16" in rts and "ov" in rts:
        for T in meta["threads"]:
            gms = suite_geomeans(results, T, "ov", "kiln_bf16")
            for suite in ("transformer", "cnn"):
                gm, n = gms[suite]
                out.append((f"kiln bf16 ≥ OpenVINO default precision, {suite}s, "
                            f"{T} thread(s)", gm is not None and gm >= 1.0,
                            f"{gm:.2f}x (n={n})" if gm else "—"))
    if "kiln" not in rts:
        return out
    for T in meta["threads"]:
        if "ort" in rts:
            gm, n = suite_geomeans(results, T, "ort", "kiln")["all"]
            out.append((f"kiln ≥ 1.10x ORT geomean, {T} thread(s)",
                        gm is not None and gm >= 1.10, f"{gm:.2f}x (n={n})" if gm else "—"))
            slow = [(res["name"], ratio(res["threads"].get(str(T), {}), "ort", "kiln"))
                    for res in results]
            bad = [f"{m} {x:.2f}x" for m, x in slow if x is not None and x < 0.95]
            out.append((f"no model < 0.95x ORT, {T} thread(s)", not bad,
                        ", ".join(bad) or "none below"))
        for peer in ("inductor", "inductor_max"):
            if peer not in rts:
                continue
            gms = suite_geomeans(results, T, peer, "kiln")
            parts = [f"{s} {gms[s][0]:.2f}x" for s in SUITES if gms[s][0]]
            ok = all(gms[s][0] > 1.0 for s in SUITES if gms[s][0]) and bool(parts)
            out.append((f"kiln faster than {LABELS[peer]} per suite, {T} thread(s)",
                        ok, ", ".join(parts) or "—"))
        for res in results:
            tr = res.get("threads", {}).get(str(T), {})
            k, ref = tr.get("kiln", {}), tr.get("onednn", {})
            if "gflops" in ref and "median_ms" in k and res.get("gflops"):
                g = res["gflops"] / k["median_ms"] * 1e3
                out.append((f"{res['name']} ≥ 95% of oneDNN matmul GFLOP/s, {T} thread(s)",
                            g >= 0.95 * ref["gflops"],
                            f"{g:.1f} of {ref['gflops']:.1f} GFLOP/s "
                            f"({100 * g / ref['gflops']:.0f}%)"))
    mem_bad, mem_n = [], 0
    for res in results:
        for T, tr in res.get("threads", {}).items():
            k, o = tr.get("kiln", {}), tr.get("ort", {}).get("memory")
            if "arena_bytes" in k and o and o.get("run_growth_bytes") is not None:
                mem_n += 1
                if k["arena_bytes"] > o["run_growth_bytes"]:
                    mem_bad.append(f"{res['name']} t{T}")
    if mem_n:
        out.append(("kiln activation memory (arena) ≤ ORT's (run growth)", not mem_bad,
                    ", ".join(mem_bad) or f"all {mem_n} model/thread pairs"))
    wrong = [f"{res['name']}/{LABELS.get(r, r)}/t{T}" for res in results
             for T, tr in res.get("threads", {}).items() for r, t in tr.items()
             if r in KILN_RUNTIMES and t.get("status") in ("wrong", "error")]
    n_ok = sum(1 for res in results for tr in res.get("threads", {}).values()
               if tr.get("kiln", {}).get("status") == "ok")
    out.append((f"kiln outputs within {meta['max_rel']:g} x max|ref|", not wrong,
                ", ".join(wrong) or f"all {n_ok} model/thread pairs"))
    return out


def write_report(meta, results, out_dir, stem):
    rts = meta["runtimes"]
    L = []
    m = meta["machine"]
    v = meta["versions"]
    L.append(f"# Peer benchmark — {meta['date']} on {m['host']}")
    L.append("")
    if meta.get("quick"):
        L.append("**--quick run: few short rounds, for checking the script, not for "
                 "quoting.**")
        L.append("")
    L.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cores')} cores, "
             f"{m.get('mem_gib')} GiB, Linux {m.get('kernel')}; SIMD flags: "
             f"{' '.join(m.get('simd_flags', []))}")
    ls, le = meta["load_start"], meta["load_end"]
    L.append(f"- Load average (1/5/15 min) at start {ls[0]:.2f} / {ls[1]:.2f} / "
             f"{ls[2]:.2f}, at end {le[0]:.2f} / {le[1]:.2f} / {le[2]:.2f}. "
             f"{meta.get('note', '')}")
    L.append(f"- Versions: Python {m.get('python')}, torch {v['torch']}, torchvision "
             f"{v['torchvision']}, onnxruntime {v['onnxruntime']}, openvino "
             f"{v.get('openvino', 'missing')}, onnx {v['onnx']}, "
             f"numpy {v['numpy']}; kiln at {v.get('kiln_git', '?')}; kilnc "
             f"`{v['kilnc']}`")
    rt = meta.get("round_time", meta["min_time"] / meta["rounds"])
    L.append(f"- Settings: threads {meta['threads']}; {meta['rounds']} interleaved rounds "
             f"(A B C D A B C D) of {rt:g} s each per runtime and thread count, after "
             f"{meta['warmup']} s of warm-up; kiln: one `kilnc bench --min-time={rt:g}` "
             f"per round (warm JIT cache); "
             f"torch.compile backend inductor, freezing "
             f"{'on' if meta['freezing'] else 'off'}; ORT CPUExecutionProvider, intra-op "
             f"= threads, inter-op 1, ORT_ENABLE_ALL; OpenVINO CPU plugin "
             f"PERFORMANCE_HINT=LATENCY, NUM_STREAMS=1, INFERENCE_NUM_THREADS = threads "
             f"(OpenVINO f32: INFERENCE_PRECISION_HINT=f32; OpenVINO default: its own "
             f"choice); OMP_WAIT_POLICY "
             f"{meta.get('omp_wait_policy')}; correctness: max|out - ref| <= "
             f"{meta['max_rel']:g} x max|ref| against test_data_set_0 ("
             + ("ONNX Runtime's outputs, tools/corpus; fp16 and int8 models and "
                "bf16/fp16 arithmetic: " + ", ".join(f"{k} {v:g}" for k, v in
                                                     LOWP_TOLERANCE.items())
                + "; in this run the ORT and OpenVINO columns of int8 models are the "
                "int8 figures" if meta.get("corpus") else "PyTorch 1.13's outputs")
             + "), every runtime, every thread count.")
    L.append(f"- Command: `{meta.get('command', '?')}`")
    L.append(f"- Wall time {meta['wall_s'] / 60:.1f} min (estimated "
             f"{meta.get('estimate_s', 0) / 60:.1f} min).")
    for run in meta.get("runs", [])[1:]:
        L.append(f"- Resumed {run.get('started')}: `peer_bench.py "
                 f"{shlex.join(run.get('argv') or [])}`")
    L.append("")
    L.append("Latency cells: median over rounds of each round's median, in ms (p90 of "
             "all iterations). Speedup = peer's median / kiln's (above 1: kiln is "
             "faster). WRONG = outputs off by more than the tolerance; ERROR = failed "
             "to build or run (see Failures).")

    tgt = targets(meta, results)
    if tgt:
        L.append("")
        L.append("## Targets")
        L.append("")
        L.append("| target | met | measured |")
        L.append("|---|---|---|")
        for text, ok, detail in tgt:
            L.append(f"| {text} | {'yes' if ok else '**no**'} | {detail} |")

    peers = [p for p in PEERS if p in rts] if "kiln" in rts else []
    # kiln's bf16 mode is compared with OpenVINO's default precision (bf16 where
    # the CPU has it), and with kiln's own f32.
    bf16_pairs = [(f"kiln bf16 vs {LABELS[p]}", p, "kiln_bf16") for p in ("ov", "kiln")
                  if "kiln_bf16" in rts and p in rts]
    for T in meta["threads"]:
        key = str(T)
        L.append("")
        L.append(f"## {T} thread{'s' if T > 1 else ''}")
        L.append("")
        head = ["model", "suite", "GFLOP"] + [f"{LABELS[r]} ms" for r in rts] + \
            [f"kiln vs {LABELS[p]}" for p in peers] + [b[0] for b in bf16_pairs]
        L.append("| " + " | ".join(head) + " |")
        L.append("|---|---|" + "---:|" * (len(head) - 2))
        for res in results:
            tr = res.get("threads", {}).get(key, {})
            g = res.get("gflops")
            row = [res["name"], res["suite"], f"{g:.2f}" if g is not None else "?"]
            row += [fmt_cell(tr.get(r)) if tr else res.get("status", "—").upper()
                    for r in rts]
            for num, den in [(p, "kiln") for p in peers] + \
                    [(b[1], b[2]) for b in bf16_pairs]:
                x = ratio(tr, num, den)
                row.append(f"{x:.2f}x" if x else "—")
            L.append("| " + " | ".join(row) + " |")
        pairs = [(f"kiln vs {LABELS[p]}", p, "kiln") for p in peers] + bf16_pairs + \
            [(f"{LABELS[r]} vs eager", "eager", r) for r in rts
             if r not in ("eager",) + KILN_RUNTIMES and "eager" in rts]
        if pairs:
            L.append("")
            L.append(f"Geometric mean speedups, {T} thread{'s' if T > 1 else ''} "
                     "(models where both passed; n = models):")
            L.append("")
            L.append("| suite | " + " | ".join(p[0] for p in pairs) + " |")
            L.append("|---|" + "---:|" * len(pairs))
            gms = [suite_geomeans(results, T, num, den) for _, num, den in pairs]
            for suite in present_suites(results) + ("all",):
                row = [suite] + [f"{g[suite][0]:.2f}x (n={g[suite][1]})" if g[suite][0]
                                 else "—" for g in gms]
                L.append("| " + " | ".join(row) + " |")

    gem = [(res, T) for res in results for T in meta["threads"]
           if "gflops" in res.get("threads", {}).get(str(T), {}).get("onednn", {})]
    if gem:
        L.append("")
        L.append("## GEMM-bound models: GFLOP/s against a plain oneDNN matmul")
        L.append("")
        L.append("Model GFLOP/s = the graph's Conv/MatMul/Gemm FLOPs / median latency. "
                 "oneDNN matmul = `//benchmarks:onednn_matmul_peak` at the model's own "
                 "GEMM shapes (convs as implicit GEMMs, FLOP-weighted harmonic mean, "
                 "weights prepacked), interleaved with the runtimes in the same rounds; "
                 "1024³ for scale.")
        L.append("")
        cols = [r for r in ("kiln", "ort", "inductor", "inductor_max") if r in rts]
        L.append("| model | threads | GFLOP | " + " | ".join(
            f"{LABELS[r]} GFLOP/s" for r in cols) +
            " | oneDNN matmul GFLOP/s (shapes covered) | kiln % of oneDNN | "
            "oneDNN 1024³ |")
        L.append("|---|---:|---:|" + "---:|" * (len(cols) + 3))
        for res, T in gem:
            tr = res["threads"][str(T)]
            ref = tr["onednn"]
            cov = res.get("gemm_reference", {}).get("coverage", 0)
            row = [res["name"], str(T), f"{res['gflops']:.2f}"]
            for r in cols:
                t = tr.get(r, {})
                row.append(f"{res['gflops'] / t['median_ms'] * 1e3:.1f}"
                           if "median_ms" in t and t.get("status") == "ok" else "—")
            k = tr.get("kiln", {})
            pct = (f"{100 * res['gflops'] / k['median_ms'] * 1e3 / ref['gflops']:.0f}%"
                   if "median_ms" in k else "—")
            row += [f"{ref['gflops']:.1f} ({100 * cov:.0f}%)", pct,
                    f"{ref['square_gflops']:.1f}"]
            L.append("| " + " | ".join(row) + " |")

    mem = [(res, T) for res in results for T in meta["threads"]
           if "arena_bytes" in res.get("threads", {}).get(str(T), {}).get("kiln", {})
           or "memory" in res.get("threads", {}).get(str(T), {}).get("ort", {})]
    if mem:
        L.append("")
        L.append("## Peak memory (MiB)")
        L.append("")
        L.append("kiln: arena = its planned activation memory; peak RSS from `kilnc "
                 "bench` (that process also compiled the model, twice). ORT: a fresh "
                 "process per model and thread count; peak RSS over session creation and "
                 "3 runs with default settings; run growth = then, in a session without "
                 "ORT's CPU arena (glibc's mmap threshold fixed), peak RSS during 3 runs "
                 "(VmHWM reset after one warm run) - RSS before them: ORT's activations "
                 "and workspaces.")
        L.append("")
        L.append("| model | threads | kiln arena | ORT run growth | kiln arena / ORT "
                 "growth | kiln peak RSS | ORT peak RSS | kiln / ORT peak RSS |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for res, T in mem:
            tr = res["threads"][str(T)]
            k, o = tr.get("kiln", {}), tr.get("ort", {}).get("memory", {})
            ka, kr = k.get("arena_bytes"), k.get("peak_rss_bytes")
            og, orss = o.get("run_growth_bytes"), o.get("peak_rss_bytes")
            r1 = f"{ka / og:.2f}" if ka is not None and og else "—"
            r2 = f"{kr / orss:.2f}" if kr and orss else "—"
            L.append(f"| {res['name']} | {T} | {mib(ka)} | {mib(og)} | {r1} | {mib(kr)} "
                     f"| {mib(orss)} | {r2} |")

    L.append("")
    L.append("## Correctness: max|out - ref| / max|ref| (worst over thread counts)")
    L.append("")
    L.append("| model | " + " | ".join(LABELS[r] for r in rts) + " |")
    L.append("|---|" + "---:|" * len(rts))
    for res in results:
        row = [res["name"]]
        for r in rts:
            ts = [tr.get(r) for tr in res.get("threads", {}).values() if tr.get(r)]
            if not ts:
                row.append("—")
                continue
            bad = [t for t in ts if t.get("status") in ("wrong", "error")]
            rels = [t.get("max_rel_err") for t in ts
                    if isinstance(t.get("max_rel_err"), float)]
            if bad:
                row.append(bad[0]["status"].upper())
            elif rels:
                row.append(f"{max(rels):.1e}")
            else:
                row.append("pass" if all(t.get("status") == "ok" for t in ts) else
                           ts[0].get("status", "—"))
        L.append("| " + " | ".join(row) + " |")

    L.append("")
    L.append("## Setup (s): torch.compile first call, ORT session, kiln compile "
             "(cold JIT cache; * = JIT cache hit)")
    L.append("")
    cols = [r for r in rts if r != "eager"]
    L.append("| model | " + " | ".join(f"{LABELS[r]} t{T}" for T in meta["threads"]
                                       for r in cols) + " |")
    L.append("|---|" + "---:|" * (len(cols) * len(meta["threads"])))
    for res in results:
        row = [res["name"]]
        for T in meta["threads"]:
            tr = res.get("threads", {}).get(str(T), {})
            for r in cols:
                t = tr.get(r) or {}
                if "compile_ms" in t:
                    row.append(f"{t['compile_ms'] / 1e3:.1f}"
                               + ("*" if t.get("compile_cache_hit") else ""))
                elif "setup_s" in t:
                    row.append(f"{t['setup_s']:.1f}")
                else:
                    row.append("—")
        L.append("| " + " | ".join(row) + " |")

    fails = []
    for res in results:
        for n in res.get("notes", []):
            fails.append(f"- {res['name']}: {n}")
        if res.get("status") in ("crashed", "timeout"):
            fails.append(f"- {res['name']}: worker {res['status']}: {res.get('note', '')}")
        for T, tr in res.get("threads", {}).items():
            for r, t in tr.items():
                if t.get("status") in ("wrong", "error"):
                    fails.append(f"- {res['name']} / {LABELS.get(r, r)} / {T} thread(s): "
                                 f"{t['status']}: {t.get('note', '')}")
    L.append("")
    L.append("## Failures and notes")
    L.append("")
    L.extend(fails or ["- none"])
    if meta.get("chart"):
        L.append("")
        L.append(f"![speedups over ORT]({os.path.basename(meta['chart'])})")
    L.append("")
    path = os.path.join(out_dir, stem + ".md")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return path


def write_chart(meta, results, out_dir, stem):
    """Speedup of every runtime over ORT per model (log scale), plus each
    suite's geometric mean, one panel per thread count."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    base = "ort"
    shown = [r for r in meta["runtimes"] if r != base]
    if base not in meta["runtimes"] or not shown:
        return None
    order = sorted(results, key=lambda r: (SUITES.index(r["suite"])
                                           if r["suite"] in SUITES else 9, r["name"]))
    suites = present_suites(results)
    names = [r["name"] for r in order] + [f"geomean {s}" for s in suites]
    fig, axes = plt.subplots(len(meta["threads"]), 1,
                             figsize=(max(10, 0.6 * len(names) + 3),
                                      4.2 * len(meta["threads"])), squeeze=False)
    width = 0.8 / len(shown)
    for ax, T in zip(axes[:, 0], meta["threads"]):
        for i, r in enumerate(shown):
            xs, ys = [], []
            for j, res in enumerate(order):
                x = ratio(res.get("threads", {}).get(str(T), {}), base, r)
                if x:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(x)
            gms = suite_geomeans(results, T, base, r)
            for j, s in enumerate(suites):
                if gms[s][0]:
                    xs.append(len(order) + j - 0.4 + width * (i + 0.5))
                    ys.append(gms[s][0])
            ax.bar(xs, ys, width, label=LABELS[r])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axvline(len(order) - 0.5, color="grey", linewidth=0.6)
        ax.set_yscale("log")
        fmt = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}x")
        ax.yaxis.set_major_formatter(fmt)
        ax.yaxis.set_minor_formatter(fmt)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("speedup over ONNX Runtime")
        ax.set_title(f"{T} thread{'s' if T > 1 else ''} — {meta['date']}, "
                     f"{meta['machine'].get('cpu', '')}"
                     + (" (--quick)" if meta.get("quick") else ""), fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, stem + ".png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ driver
def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="kiln vs torch eager, Inductor, ORT on the model zoo "
                    "(see benchmarks/README.md)")
    p.add_argument("--zoo", default=DEFAULT_ZOO, help="zoo folder (with zoo.json)")
    p.add_argument("--models", default="", help="comma-separated (default: whole zoo, "
                   "or with --corpus every corpus and converted model)")
    p.add_argument("--corpus", action="store_true",
                   help="run tools/corpus's models (real models from registry packages "
                        "and the zoo's fp16/int8 conversions) instead of the zoo")
    p.add_argument("--corpus-dir", default=DEFAULT_CORPUS,
                   help="tools/corpus's folder (corpus.json, converted/)")
    p.add_argument("--runtimes", default="eager,inductor,ort,kiln",
                   help=f"comma-separated, from {','.join(ALL_RUNTIMES)}")
    p.add_argument("--max-autotune", action="store_true",
                   help="add the inductor_max column (torch.compile mode=max-autotune; "
                        "compiles slowly, cached under ~/.cache/kiln/inductor-cache)")
    p.add_argument("--max-autotune-models", default="",
                   help="limit the inductor_max column to these models")
    p.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    p.add_argument("--quick", action="store_true",
                   help=f"short run for checking the script: {QUICK}")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 5)")
    p.add_argument("--min-time", type=float,
                   help="seconds of timed iterations per runtime and thread count, "
                        "split over the rounds (default 2)")
    p.add_argument("--warmup", type=float, help="warm-up seconds (default 0.5)")
    p.add_argument("--kiln-warmup", type=int, help="kilnc bench --warmup (default 2)")
    p.add_argument("--gemm-min-time", type=float,
                   help="benchmark_min_time per shape of the oneDNN matmul reference")
    p.add_argument("--gemm-models", default=GEMM_MODELS,
                   help="models whose GFLOP/s is held against the oneDNN matmul")
    p.add_argument("--max-rel", type=float, default=1e-4,
                   help="tolerance: max|out-ref| <= this x max|ref|")
    p.add_argument("--no-freezing", dest="freezing", action="store_false",
                   help="leave torch._inductor.config.freezing off (on by default, "
                        "PyTorch's advice for CPU inference)")
    p.add_argument("--no-memory", dest="memory", action="store_false",
                   help="skip ORT's peak-memory probe")
    p.add_argument("--kilnc", default=DEFAULT_KILNC,
                   help="kilnc binary (built with bazel build -c opt //tools:kilnc; "
                        "relative paths are from the repository root)")
    p.add_argument("--onednn-peak", default=DEFAULT_PEAK,
                   help="onednn_matmul_peak binary (//benchmarks:onednn_matmul_peak)")
    p.add_argument("--kiln-cache", default=KILN_JIT_CACHE,
                   help="JIT cache for kilnc check/bench (kept between runs)")
    p.add_argument("--kiln-bench-args", default="", help="extra args for kilnc bench")
    p.add_argument("--kiln-check-args", default="", help="extra args for kilnc check")
    p.add_argument("--model-timeout", type=float, default=1800,
                   help="seconds per model before its worker is killed")
    p.add_argument("--prepare-only", action="store_true",
                   help="compile and check every runtime (fills the Inductor and kiln "
                        "caches, records setup times for the estimate), time nothing")
    p.add_argument("--estimate-only", action="store_true",
                   help="print the expected duration and exit")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    p.add_argument("--tag", default="", help="suffix for the results file names")
    p.add_argument("--note", default="", help="a line for the report's header")
    p.add_argument("--omp-wait-policy", default="",
                   help="set OMP_WAIT_POLICY (ACTIVE/PASSIVE) for every runtime")
    p.add_argument("--resume", default="",
                   help="a results .json to extend: its models are kept and skipped")
    p.add_argument("--replace", action="store_true",
                   help="with --resume: re-run the --models given, replacing their rows")
    p.add_argument("--debian-python", default="/usr/bin/python3",
                   help="Python with Debian's torch 1.13, for models whose seeded init "
                        "differs in torch 2.x")
    p.add_argument("--dump-state-dict", default="", help=argparse.SUPPRESS)
    p.add_argument("--ort-memory", default="", help=argparse.SUPPRESS)
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.round_time = args.min_time / args.rounds
    args.runtime_list = [r for r in args.runtimes.split(",") if r]
    if args.max_autotune and "inductor_max" not in args.runtime_list:
        i = args.runtime_list.index("inductor") + 1 if "inductor" in args.runtime_list \
            else 0
        args.runtime_list.insert(i, "inductor_max")
    bad = [r for r in args.runtime_list if r not in ALL_RUNTIMES]
    if bad:
        p.error(f"unknown runtime(s) {bad}; known: {ALL_RUNTIMES}")
    if args.rounds < 1 or args.min_time <= 0:
        p.error("--rounds must be >= 1 and --min-time > 0")
    args.thread_list = [int(t) for t in args.threads.split(",") if t]
    args.max_autotune_models = [m for m in args.max_autotune_models.split(",") if m]
    args.gemm_model_list = [m for m in args.gemm_models.split(",") if m]
    args.kilnc_path = repo_path(args.kilnc)
    args.onednn_peak_path = repo_path(args.onednn_peak)
    return p, args


def worker_argv(args):
    """The flags a worker needs, in the parent's resolved form."""
    out = ["--zoo", args.zoo, "--corpus-dir", args.corpus_dir,
           "--runtimes", ",".join(args.runtime_list),
           "--threads", ",".join(map(str, args.thread_list)),
           "--rounds", str(args.rounds), "--min-time", repr(args.min_time),
           "--warmup", repr(args.warmup), "--kiln-warmup", str(args.kiln_warmup),
           "--gemm-min-time", repr(args.gemm_min_time),
           "--gemm-models", ",".join(args.gemm_model_list),
           "--max-rel", repr(args.max_rel),
           "--max-autotune-models", ",".join(args.max_autotune_models),
           "--kilnc", args.kilnc_path, "--onednn-peak", args.onednn_peak_path,
           "--kiln-cache", args.kiln_cache, "--model-timeout", repr(args.model_timeout),
           # "=" form: the values may start with "--".
           f"--kiln-bench-args={args.kiln_bench_args}",
           f"--kiln-check-args={args.kiln_check_args}",
           "--debian-python", args.debian_python]
    if not args.freezing:
        out.append("--no-freezing")
    if not args.memory:
        out.append("--no-memory")
    if args.prepare_only:
        out.append("--prepare-only")
    if args.corpus:
        out.append("--corpus")
    return out


def main():
    p, args = parse_args()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", INDUCTOR_CACHE)
    if args.dump_state_dict:
        return dump_state_dict(args)
    if args.ort_memory:
        print(json.dumps(ort_memory_probe(args.ort_memory, args.thread_list[0])))
        return 0
    if args.worker:
        res = run_worker(args, args.worker)
        with open(args.worker_out, "w") as f:
            json.dump(res, f)
        return 0

    entries = bench_entries(args)
    zoo_order = {m["name"]: i for i, m in enumerate(entries)}
    if args.models:
        want = [m for m in args.models.split(",") if m]
        unknown = set(want) - set(zoo_order)
        if unknown:
            p.error(f"unknown model(s): {sorted(unknown)}")
        entries = [entries[zoo_order[m]] for m in want]
    prev = None
    if args.resume:
        prev = load_json(args.resume, None)
        if prev is None:
            p.error(f"cannot read {args.resume}")
        if args.replace:
            redo = {m["name"] for m in entries}
            prev["results"] = [r for r in prev["results"] if r["name"] not in redo]
        done = {r["name"] for r in prev["results"]}
        entries = [m for m in entries if m["name"] not in done]

    history = load_json(HISTORY, {})
    est = {m["name"]: estimate_model(m, args, history) for m in entries}
    total_est = sum(est.values())
    print(f"peer_bench: {len(entries)} model(s) x threads {args.thread_list} x "
          f"{','.join(args.runtime_list)}; {args.rounds} rounds, {args.min_time:g} s timed "
          f"per runtime and thread count"
          + (" (--prepare-only: no timing)" if args.prepare_only else ""), file=sys.stderr)
    print("peer_bench: expected duration " + f"{total_est / 60:.1f} min ("
          + ", ".join(f"{n} {s / 60:.1f}" for n, s in est.items()) + ")"
          + ("" if history.get("models") else
             "; no history of earlier runs on this machine: a rough guess"),
          file=sys.stderr, flush=True)
    missing = [b for b, want in ((args.kilnc_path, "kiln" in args.runtime_list),
                                 (args.onednn_peak_path, bool(args.gemm_model_list)))
               if want and not os.access(b, os.X_OK)]
    for b in missing:
        print(f"peer_bench: warning: {b} is missing (build it with bazel build -c opt)",
              file=sys.stderr)
    if args.estimate_only:
        return 0

    vers = versions(args)
    t0 = time.time()
    now = datetime.datetime.now()
    argv = sys.argv[1:]
    meta = {"date": now.strftime("%Y-%m-%d %H:%M"), "machine": machine_info(),
            "load_start": os.getloadavg(), "runtimes": args.runtime_list,
            "threads": args.thread_list, "rounds": args.rounds,
            "min_time": args.min_time, "warmup": args.warmup,
            "round_time": args.round_time, "max_rel": args.max_rel,
            "freezing": args.freezing, "note": args.note, "zoo": args.zoo,
            "corpus": args.corpus,
            "quick": args.quick, "estimate_s": total_est,
            "command": "peer_bench.py " + shlex.join(argv), "versions": vers,
            "runs": [{"started": now.strftime("%Y-%m-%d %H:%M"), "argv": argv}]}
    results = []
    wall_before = 0.0
    out_dir = args.out
    stem = now.strftime("%Y-%m-%d") + "-" + meta["machine"]["host"] + \
        (f"-{args.tag}" if args.tag else "-quick" if args.quick else "")
    if prev:
        pm = prev["meta"]
        for key in ("date", "load_start", "machine", "command", "quick"):
            meta[key] = pm.get(key, meta[key])
        meta["runtimes"] = pm["runtimes"] + [r for r in meta["runtimes"]
                                             if r not in pm["runtimes"]]
        meta["runs"] = pm.get("runs", []) + meta["runs"]
        meta["estimate_s"] = pm.get("estimate_s", 0) + total_est
        wall_before = pm.get("wall_s", 0.0)
        results = prev["results"]
        out_dir = os.path.dirname(os.path.abspath(args.resume))
        stem = os.path.basename(args.resume)[:-len(".json")]
    if not args.prepare_only:
        os.makedirs(out_dir, exist_ok=True)

    env = dict(os.environ)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    meta["omp_wait_policy"] = args.omp_wait_policy or "library default"
    base = [sys.executable, os.path.abspath(__file__)] + worker_argv(args)
    path = None
    for i, entry in enumerate(entries, 1):
        name = entry["name"]
        print(f"[{i}/{len(entries)}] {name} ({entry['suite']}), load "
              f"{os.getloadavg()[0]:.2f}, {(time.time() - t0) / 60:.1f} min elapsed",
              file=sys.stderr, flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
            out_json = tf.name
        res = {"name": name, "suite": entry["suite"], "gflops": entry.get("gflops"),
               "threads": {}}
        w0 = time.time()
        try:
            proc = subprocess.run(base + ["--worker", name, "--worker-out", out_json],
                                  timeout=args.model_timeout, env=env)
            if proc.returncode == 0:
                res = json.load(open(out_json))
            else:
                res.update(status="crashed", note=f"exit code {proc.returncode}")
        except subprocess.TimeoutExpired:
            res.update(status="timeout", note=f"more than {args.model_timeout:.0f} s")
        finally:
            os.unlink(out_json)
        res["worker_s"] = round(time.time() - w0, 1)
        print(f"  {name}: {res['worker_s']:.0f} s (estimated {est[name]:.0f} s)",
              file=sys.stderr, flush=True)
        update_history(history, res, args)
        save_json(HISTORY, history)
        if args.prepare_only:
            continue
        results = [r for r in results if r["name"] != name] + [res]
        results.sort(key=lambda r: zoo_order.get(r["name"], 99))
        # Write what we have after every model so a long run leaves results.
        meta["load_end"] = os.getloadavg()
        meta["wall_s"] = wall_before + time.time() - t0
        meta["chart"] = write_chart(meta, results, out_dir, stem)
        save_json(os.path.join(out_dir, stem + ".json"), {"meta": meta, "results": results})
        path = write_report(meta, results, out_dir, stem)
    print(f"peer_bench: done in {(time.time() - t0) / 60:.1f} min (estimated "
          f"{total_est / 60:.1f} min)" + (f"; wrote {path}" if path else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
