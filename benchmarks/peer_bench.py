#!/usr/bin/env python3
# File: benchmarks/peer_bench.py — runs kiln's model zoo through kiln and its
# peers (PyTorch eager, torch.compile/Inductor, ONNX Runtime): checks every
# runtime's outputs against the zoo's, times them interleaved (A B C D A B C D)
# at 1 and 2 threads, and writes a markdown table, a PNG chart and raw JSON.
#
#   ~/.cache/kiln/bench-venv/bin/python benchmarks/peer_bench.py
#   .../python benchmarks/peer_bench.py --models resnet18,bert_base \
#       --runtimes eager,inductor,inductor_max,ort,kiln --threads 1,2
#
# Run it with the virtualenv that benchmarks/setup_venv.sh makes. Each model
# runs in its own worker process, so a crash or a hang costs one model only.
import argparse
import datetime
import json
import math
import os
import platform
import shlex
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_ZOO = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "kiln", "zoo")
DEFAULT_KILNC_BIN = ("/root/.cache/bazel_me/execroot/kiln/bazel-out/k8-opt/bin/"
                     "tools/kilnc")
SUITES = ("cnn", "transformer", "misc")
ALL_RUNTIMES = ("eager", "inductor", "inductor_max", "ort", "kiln")
LABELS = {"eager": "torch eager", "inductor": "inductor",
          "inductor_max": "inductor max-autotune", "ort": "ORT", "kiln": "kiln"}


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


def kilnc_command(args):
    if args.kilnc:
        return shlex.split(args.kilnc)
    if os.environ.get("KILNC"):
        return shlex.split(os.environ["KILNC"])
    if os.access(DEFAULT_KILNC_BIN, os.X_OK):
        return [DEFAULT_KILNC_BIN]
    return ["bazel", "run", "--noshow_progress",
            "//tools:kilnc", "--"]


def kilnc_has_bench(cmd):
    """Returns (True, "") when kilnc lists a bench command, else (False, why)."""
    try:
        p = subprocess.run(cmd + ["--help"], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"`{' '.join(cmd)}` could not run: {e}"
    text = p.stdout + p.stderr
    for line in text.splitlines():
        if line.strip().startswith("bench"):
            return True, ""
    return False, (f"`{' '.join(cmd)}` has no `bench` command yet "
                   "(kilnc --help lists none)")


def parse_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


# ------------------------------------------------------------------ runtimes
class Runtime:
    """One way to run a model; the worker drives all of them the same way."""
    name = ""
    per_iteration = True  # False: each batch yields one sample (kiln's runner)

    def prepare(self, threads):
        """Builds/compiles for `threads`; returns extra info (setup_s, ...)."""
        raise NotImplementedError

    def outputs(self):
        raise NotImplementedError

    def call(self):
        raise NotImplementedError

    def batch(self, n):
        pc = time.perf_counter
        call = self.call
        samples = []
        for _ in range(n):
            t0 = pc()
            call()
            samples.append((pc() - t0) * 1e3)
        return samples, {}

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

    def _run(self):
        with self.torch.no_grad():
            return self.fn(*self.args)

    def outputs(self):
        out = self._run()
        if isinstance(out, self.torch.Tensor):
            out = (out,)
        return [o.detach().numpy() for o in out]

    def call(self):
        self._run()

    def batch(self, n):
        with self.torch.no_grad():
            pc = time.perf_counter
            fn, args = self.fn, self.args
            samples = []
            for _ in range(n):
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
        ort = self.ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        t0 = time.perf_counter()
        self.sess = ort.InferenceSession(self.path, so,
                                         providers=["CPUExecutionProvider"])
        return {"setup_s": round(time.perf_counter() - t0, 2)}

    def outputs(self):
        return self.sess.run(None, self.feeds)

    def call(self):
        self.sess.run(None, self.feeds)

    def close(self):
        self.sess = None


class KilnRuntime(Runtime):
    """kiln through `kilnc bench MODEL --json --threads=N`: each batch is one
    kilnc run (its own warm-up and timing loop); its median is one sample."""
    per_iteration = False

    def __init__(self, cmd, model_dir, extra_bench, extra_check, max_rel):
        self.cmd = cmd
        self.dir = model_dir
        self.extra_bench = extra_bench
        self.extra_check = extra_check
        self.max_rel = max_rel
        self.threads = 1
        self.checked = None

    def prepare(self, threads):
        self.threads = threads
        return {}

    def check(self):
        """kiln's own comparison with the stored outputs: (ok, message); run
        once per model (kilnc check takes no thread count)."""
        if self.checked is not None:
            return self.checked
        cmd = self.cmd + ["check", self.dir, f"--max-rel={self.max_rel}"] + \
            self.extra_check
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                           timeout=3600)
        tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
        self.checked = (p.returncode == 0, " | ".join(tail))
        return self.checked

    def batch(self, n):
        cmd = self.cmd + ["bench", os.path.join(self.dir, "model.onnx"), "--json",
                          f"--threads={self.threads}"] + self.extra_bench
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                           timeout=3600)
        res = parse_json_line(p.stdout)
        if p.returncode != 0 or res is None or "median_ms" not in res:
            raise RuntimeError(f"kilnc bench failed (exit {p.returncode}): "
                               + (p.stdout + p.stderr).strip()[-300:])
        samples = res.get("samples_ms") or [float(res["median_ms"])]
        return [float(s) for s in samples], res


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
    """The zoo's PyTorch module, rebuilt as tools/zoo/export_zoo.py builds it
    (same factory, same seed, same weight calibration)."""
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
    cache = os.path.join(os.path.dirname(os.path.abspath(args.zoo)), "bench-weights")
    path = os.path.join(cache, f"{entry['name']}-{entry['seed']}.pt")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
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


def run_worker(args, name):
    import numpy as np  # noqa: F401 — fail early when the venv is incomplete
    zoo = json.load(open(os.path.join(args.zoo, "zoo.json")))
    entry = next(m for m in zoo["models"] if m["name"] == name)
    model_dir = os.path.join(args.zoo, name)
    inputs, refs = load_test_data(model_dir)
    input_arrays = [a for _, a in inputs]
    runtimes = args.runtime_list
    result = {"name": name, "suite": entry["suite"], "gflops": entry.get("gflops"),
              "load_start": os.getloadavg()[0], "threads": {}}
    rts = {}
    errors = {}
    need_torch = any(r in ("eager", "inductor", "inductor_max") for r in runtimes)
    if need_torch:
        import torch
        torch.set_num_interop_threads(1)
        if args.freezing:
            import torch._inductor.config as icfg
            icfg.freezing = True
        try:
            model = build_torch_model(torch, entry)
            torch.set_num_threads(args.thread_list[0])
            probe = TorchRuntime(torch, model, input_arrays)
            ok, rel, _ = compare(probe.outputs(), refs, args.max_rel)
            if not ok:
                model.load_state_dict(torch.load(debian_weights(args, entry),
                                                 weights_only=True))
                ok2, rel2, _ = compare(probe.outputs(), refs, args.max_rel)
                result["notes"] = [
                    f"torch {torch.__version__} seeded as the exporter gives other "
                    f"weights (max rel err {rel:.1e}); took the weights from Debian's "
                    f"torch 1.13 ({args.debian_python}): max rel err now {rel2:.1e}"]
            del probe
        except Exception as e:  # noqa: BLE001 — recorded per runtime
            for r in runtimes:
                if r in ("eager", "inductor", "inductor_max"):
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
        rts["ort"] = OrtRuntime(os.path.join(model_dir, "model.onnx"),
                                {n: a for n, a in inputs})
    if "kiln" in runtimes:
        rts["kiln"] = KilnRuntime(args.kilnc_cmd, model_dir,
                                  shlex.split(args.kiln_bench_args),
                                  shlex.split(args.kiln_check_args), args.max_rel)
    order = [r for r in runtimes if r in rts]

    for threads in args.thread_list:
        tres = {r: {"status": "skipped", "note": errors[r]} if r in errors and
                errors[r].startswith("skipped") else
                {"status": "error", "note": errors[r]} for r in errors}
        live = []
        for r in order:
            rt = rts[r]
            info = {"status": "ok"}
            try:
                info.update(rt.prepare(threads))
                if isinstance(rt, KilnRuntime):
                    ok, note = rt.check()
                    info["max_rel_err"] = None
                    if not ok:
                        info.update(status="wrong", note=note)
                else:
                    ok, rel, note = compare(rt.outputs(), refs, args.max_rel)
                    info["max_rel_err"] = rel
                    if not ok:
                        info.update(status="wrong",
                                    note=note or f"max rel err {rel:.2e}")
            except Exception as e:  # noqa: BLE001 — reported in the table
                info.update(status="error", note=f"{type(e).__name__}: {e}"[:400])
            tres[r] = info
            if info["status"] == "ok":
                live.append(r)
            print(f"  {name} t{threads} {r}: {info['status']}"
                  + (f" ({info.get('note')})" if info.get("note") else "")
                  + (f" setup {info['setup_s']} s" if "setup_s" in info else ""),
                  file=sys.stderr, flush=True)

        # Warm-up, then size each runtime's batch from its warm-up latency.
        n_iter = {}
        for r in list(live):
            rt = rts[r]
            try:
                if rt.per_iteration:
                    t_end = time.perf_counter() + args.warmup
                    warm = []
                    while len(warm) < 2 or time.perf_counter() < t_end:
                        warm += rt.batch(1)[0]
                    est = percentile(warm[1:], 0.5)
                    n_iter[r] = max(1, int(round(args.min_time / args.rounds / est * 1e3)))
                else:
                    n_iter[r] = 1
            except Exception as e:  # noqa: BLE001
                tres[r].update(status="error", note=f"warm-up: {type(e).__name__}: {e}"[:400])
                live.remove(r)

        samples = {r: [] for r in live}
        round_medians = {r: [] for r in live}
        extra = {r: [] for r in live}
        for _ in range(args.rounds):
            for r in list(live):
                try:
                    s, info = rts[r].batch(n_iter[r])
                except Exception as e:  # noqa: BLE001
                    tres[r].update(status="error", note=f"{type(e).__name__}: {e}"[:400])
                    live.remove(r)
                    continue
                samples[r] += s
                round_medians[r].append(percentile(s, 0.5))
                if info:
                    extra[r].append(info)
        for r in live:
            s = samples[r]
            t = tres[r]
            t.update(median_ms=percentile(s, 0.5), p90_ms=percentile(s, 0.9),
                     min_ms=min(s), samples=len(s), iters_per_round=n_iter[r],
                     round_medians_ms=[round(x, 4) for x in round_medians[r]])
            if extra[r]:  # kiln: its own p90, compile time and memory
                t["p90_ms"] = percentile([float(x.get("p90_ms", "nan")) for x in extra[r]], 0.5)
                for key in ("compile_ms", "peak_rss_bytes"):
                    vals = [float(x[key]) for x in extra[r] if key in x]
                    if vals:
                        t[key] = percentile(vals, 0.5)
                t["kilnc"] = extra[r][-1]
            print(f"  {name} t{threads} {r}: median {t['median_ms']:.3f} ms, "
                  f"p90 {t['p90_ms']:.3f} ms ({len(s)} samples)",
                  file=sys.stderr, flush=True)
        result["threads"][str(threads)] = tres
    for rt in rts.values():
        rt.close()
    result["load_end"] = os.getloadavg()[0]
    return result


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
                info["simd_flags"] = [f for f in flags if f.startswith(("avx", "fma", "f16c", "amx", "sse4"))]
                break
        mem = open("/proc/meminfo").readline().split()
        info["mem_gib"] = round(int(mem[1]) / 2**20, 1)
    except OSError:
        pass
    return info


def versions(kiln_cmd, kiln_note):
    v = {}
    for mod in ("torch", "torchvision", "onnxruntime", "onnx", "numpy", "matplotlib"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            v[mod] = "missing"
    try:
        v["kiln_git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                       capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    v["kilnc"] = " ".join(kiln_cmd) + (f" ({kiln_note})" if kiln_note else "")
    return v


def fmt_cell(t):
    if t is None:
        return "—"
    st = t.get("status")
    if st == "ok" and "median_ms" in t:
        return f"{t['median_ms']:.2f} ({t['p90_ms']:.2f})"
    if st == "wrong":
        rel = t.get("max_rel_err")
        return f"WRONG ({rel:.1e})" if isinstance(rel, float) and math.isfinite(rel) else "WRONG"
    if st == "skipped":
        return "skip"
    return st.upper() if st else "—"


def ratio(results_t, num, den):
    a, b = results_t.get(num), results_t.get(den)
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return None
    if "median_ms" not in a or "median_ms" not in b:
        return None
    return a["median_ms"] / b["median_ms"]


def ratios_for(runtimes):
    """(label, numerator, denominator): speedup = numerator ms / denominator ms."""
    out = []
    for r in runtimes:
        if r != "eager" and "eager" in runtimes:
            out.append((f"{LABELS[r]} vs eager", "eager", r))
    if "kiln" in runtimes:
        for peer in ("ort", "inductor", "inductor_max"):
            if peer in runtimes:
                out.append((f"kiln vs {LABELS[peer]}", peer, "kiln"))
    return out


def write_report(meta, results, out_dir, stem):
    runtimes = meta["runtimes"]
    shown = [r for r in runtimes if r != "kiln" or meta["kiln_enabled"]]
    rat = ratios_for(shown)
    L = []
    L.append(f"# Peer benchmark — {meta['date']} on {meta['machine']['host']}")
    L.append("")
    m = meta["machine"]
    L.append(f"- Machine: {m.get('cpu', '?')}, {m.get('cores')} cores, "
             f"{m.get('mem_gib')} GiB, Linux {m.get('kernel')}; SIMD flags: "
             f"{' '.join(m.get('simd_flags', []))}")
    L.append(f"- Load average (1 min) at start {meta['load_start'][0]:.2f} / "
             f"{meta['load_start'][1]:.2f} / {meta['load_start'][2]:.2f}, at end "
             f"{meta['load_end'][0]:.2f} / {meta['load_end'][1]:.2f} / "
             f"{meta['load_end'][2]:.2f} (1/5/15 min). {meta.get('note', '')}")
    v = meta["versions"]
    L.append(f"- Versions: Python {m.get('python')}, torch {v['torch']}, torchvision "
             f"{v['torchvision']}, onnxruntime {v['onnxruntime']}, onnx {v['onnx']}, "
             f"numpy {v['numpy']}; kiln at {v.get('kiln_git', '?')}")
    L.append(f"- kilnc: {v['kilnc']}")
    L.append(f"- Settings: threads {meta['threads']}; {meta['rounds']} interleaved rounds "
             f"per runtime, about {meta['min_time']} s of timed iterations per runtime "
             f"and thread count after {meta['warmup']} s of warm-up; torch.compile "
             f"backend inductor, freezing {'on' if meta['freezing'] else 'off'}; ORT "
             f"CPUExecutionProvider, intra-op = threads, inter-op 1, ORT_ENABLE_ALL; "
             f"OMP_WAIT_POLICY {meta.get('omp_wait_policy', 'library default')}; "
             f"correctness: max|out - ref| <= {meta['max_rel']} x max|ref| against "
             f"test_data_set_0 (PyTorch 1.13's outputs).")
    L.append(f"- Wall time {meta['wall_s'] / 60:.1f} min.")
    runs = meta.get("runs", [])
    if len(runs) > 1:
        L.append(f"- Run in {len(runs)} parts (--resume):")
        for run in runs:
            la, lb = run.get("load_start"), run.get("load_end")
            loads = (f"; load {la[0]:.2f} at start, {lb[0]:.2f} at end"
                     if la and lb else "")
            L.append(f"  - {run.get('started', meta['date'])}: `peer_bench.py "
                     f"{shlex.join(run.get('argv') or [])}`{loads}")
    L.append("")
    L.append("Cells: median latency in ms (p90). Speedup = other runtime's median / "
             "this one's (above 1 is faster). WRONG = outputs off by more than the "
             "tolerance (max rel error shown); ERROR = failed to build or run (see "
             "Failures).")
    for T in meta["threads"]:
        key = str(T)
        L.append("")
        L.append(f"## {T} thread{'s' if T > 1 else ''}")
        L.append("")
        head = ["model", "suite", "GFLOP"] + [f"{LABELS[r]} ms" for r in shown] + \
            [r[0] for r in rat]
        L.append("| " + " | ".join(head) + " |")
        L.append("|" + "---|" * 3 + "---:|" * (len(head) - 3))
        for res in results:
            tr = res.get("threads", {}).get(key, {})
            g = res.get("gflops")
            row = [res["name"], res["suite"], f"{g:.2f}" if g is not None else "?"]
            row += [fmt_cell(tr.get(r)) if tr else res.get("status", "—").upper()
                    for r in shown]
            for _, num, den in rat:
                x = ratio(tr, num, den)
                row.append(f"{x:.2f}x" if x else "—")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
        L.append(f"Geometric mean speedups, {T} thread{'s' if T > 1 else ''} "
                 "(models where both runtimes passed; n = models counted):")
        L.append("")
        L.append("| suite | " + " | ".join(r[0] for r in rat) + " |")
        L.append("|---|" + "---:|" * len(rat))
        for suite in SUITES + ("all",):
            row = [suite]
            for _, num, den in rat:
                xs = [ratio(res.get("threads", {}).get(key, {}), num, den)
                      for res in results if suite == "all" or res["suite"] == suite]
                xs = [x for x in xs if x]
                gm = geomean(xs)
                row.append(f"{gm:.2f}x (n={len(xs)})" if gm else "—")
            L.append("| " + " | ".join(row) + " |")
    # Setup (compile) times.
    L.append("")
    L.append("## Setup time (s): torch.compile first call, ORT session creation, "
             "kiln compile")
    L.append("")
    cols = [r for r in shown if r != "eager"]
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
                    row.append(f"{t['compile_ms'] / 1e3:.1f}")
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
    if not meta["kiln_enabled"] and "kiln" in runtimes:
        L.append(f"- kiln column skipped: {meta['kiln_note']}")
    L.extend(fails or ["- none"])
    if meta.get("chart"):
        L.append("")
        L.append(f"![speedups vs torch eager]({os.path.basename(meta['chart'])})")
    L.append("")
    path = os.path.join(out_dir, stem + ".md")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return path


def write_chart(meta, results, out_dir, stem):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return None
    shown = [r for r in meta["runtimes"] if r != "eager" and
             (r != "kiln" or meta["kiln_enabled"])]
    if "eager" not in meta["runtimes"] or not shown:
        return None
    order = sorted(results, key=lambda r: (SUITES.index(r["suite"])
                                           if r["suite"] in SUITES else 9, r["name"]))
    names = [r["name"] for r in order]
    fig, axes = plt.subplots(len(meta["threads"]), 1,
                             figsize=(max(10, 0.6 * len(names) + 3),
                                      4.2 * len(meta["threads"])), squeeze=False)
    width = 0.8 / len(shown)
    for ax, T in zip(axes[:, 0], meta["threads"]):
        for i, r in enumerate(shown):
            xs, ys = [], []
            for j, res in enumerate(order):
                x = ratio(res.get("threads", {}).get(str(T), {}), "eager", r)
                if x:
                    xs.append(j - 0.4 + width * (i + 0.5))
                    ys.append(x)
            ax.bar(xs, ys, width, label=LABELS[r])
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        fmt = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}x")
        ax.yaxis.set_major_formatter(fmt)
        ax.yaxis.set_minor_formatter(fmt)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("speedup vs torch eager")
        ax.set_title(f"{T} thread{'s' if T > 1 else ''} — {meta['date']}, "
                     f"{meta['machine'].get('cpu', '')}", fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, stem + ".png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ------------------------------------------------------------------ driver
def main():
    p = argparse.ArgumentParser(description=__doc__ or "kiln peer benchmark")
    p.add_argument("--zoo", default=DEFAULT_ZOO, help="zoo folder (with zoo.json)")
    p.add_argument("--models", default="", help="comma-separated (default: whole zoo)")
    p.add_argument("--runtimes", default="eager,inductor,ort,kiln",
                   help=f"comma-separated, from {','.join(ALL_RUNTIMES)}")
    p.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    p.add_argument("--min-time", type=float, default=2.0,
                   help="seconds of timed iterations per runtime and thread count")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds")
    p.add_argument("--max-rel", type=float, default=1e-4,
                   help="tolerance: max|out-ref| <= this x max|ref|")
    p.add_argument("--max-autotune-models", default="",
                   help="limit the inductor_max runtime to these models")
    p.add_argument("--no-freezing", dest="freezing", action="store_false",
                   help="leave torch._inductor.config.freezing off (it is on by "
                        "default: PyTorch's advice for CPU inference)")
    p.add_argument("--kilnc", default="",
                   help="kilnc command (default: $KILNC, else the bazel_me binary, "
                        "else `bazel run //tools:kilnc --`)")
    p.add_argument("--kiln-bench-args", default="", help="extra args for kilnc bench")
    p.add_argument("--kiln-check-args", default="", help="extra args for kilnc check")
    p.add_argument("--model-timeout", type=float, default=1200,
                   help="seconds per model before its worker is killed")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    p.add_argument("--tag", default="", help="suffix for the results file names")
    p.add_argument("--note", default="", help="a line for the report's header")
    p.add_argument("--omp-wait-policy", default="",
                   help="set OMP_WAIT_POLICY (ACTIVE/PASSIVE) for the runtimes "
                        "(default: the libraries' own)")
    p.add_argument("--resume", default="",
                   help="a results .json to extend: its models are kept and "
                        "skipped, and the report is rewritten with all of them")
    p.add_argument("--replace", action="store_true",
                   help="with --resume: re-run the --models given even if the "
                        "results have them, replacing their rows")
    p.add_argument("--debian-python", default="/usr/bin/python3",
                   help="Python with Debian's torch 1.13, for models whose "
                        "seeded init differs in torch 2.x")
    p.add_argument("--dump-state-dict", default="", help=argparse.SUPPRESS)
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.runtime_list = [r for r in args.runtimes.split(",") if r]
    bad = [r for r in args.runtime_list if r not in ALL_RUNTIMES]
    if bad:
        p.error(f"unknown runtime(s) {bad}; known: {ALL_RUNTIMES}")
    args.thread_list = [int(t) for t in args.threads.split(",") if t]
    args.max_autotune_models = [m for m in args.max_autotune_models.split(",") if m]
    args.kilnc_cmd = kilnc_command(args)

    if args.dump_state_dict:
        return dump_state_dict(args)
    if args.worker:
        res = run_worker(args, args.worker)
        with open(args.worker_out, "w") as f:
            json.dump(res, f)
        return 0

    zoo = json.load(open(os.path.join(args.zoo, "zoo.json")))
    entries = zoo["models"]
    zoo_order = {m["name"]: i for i, m in enumerate(entries)}
    if args.models:
        want = [m for m in args.models.split(",") if m]
        unknown = set(want) - set(zoo_order)
        if unknown:
            p.error(f"unknown model(s): {sorted(unknown)}")
        entries = [entries[zoo_order[m]] for m in want]  # in the order given
    prev = None
    if args.resume:
        with open(args.resume) as f:
            prev = json.load(f)
        if args.replace:
            redo = {m["name"] for m in entries}
            prev["results"] = [r for r in prev["results"] if r["name"] not in redo]
        done = {r["name"] for r in prev["results"]}
        entries = [m for m in entries if m["name"] not in done]

    kiln_enabled, kiln_note = False, ""
    if "kiln" in args.runtime_list:
        kiln_enabled, kiln_note = kilnc_has_bench(args.kilnc_cmd)
        if not kiln_enabled:
            print(f"peer_bench: kiln column skipped: {kiln_note}", file=sys.stderr)
    worker_runtimes = [r for r in args.runtime_list if r != "kiln" or kiln_enabled]

    t0 = time.time()
    now = datetime.datetime.now()
    run_info = {"started": now.strftime("%Y-%m-%d %H:%M"), "argv": sys.argv[1:],
                "load_start": os.getloadavg()}
    meta = {"date": now.strftime("%Y-%m-%d %H:%M"), "machine": machine_info(),
            "load_start": os.getloadavg(), "runtimes": args.runtime_list,
            "threads": args.thread_list, "rounds": args.rounds,
            "min_time": args.min_time, "warmup": args.warmup,
            "max_rel": args.max_rel, "freezing": args.freezing,
            "kiln_enabled": kiln_enabled, "kiln_note": kiln_note,
            "note": args.note, "zoo": args.zoo,
            "argv": sys.argv[1:]}
    meta["runs"] = [run_info]
    wall_before = 0.0
    results = []
    os.makedirs(args.out, exist_ok=True)
    stem = now.strftime("%Y-%m-%d") + "-" + meta["machine"]["host"] + \
        (f"-{args.tag}" if args.tag else "")
    if prev:
        pm = prev["meta"]
        for key in ("date", "load_start", "machine"):
            meta[key] = pm[key]
        meta["note"] = args.note or pm.get("note", "")
        meta["runtimes"] = pm["runtimes"] + [r for r in meta["runtimes"]
                                             if r not in pm["runtimes"]]
        meta["runs"] = pm.get("runs", [{"argv": pm.get("argv")}]) + [run_info]
        meta["kiln_enabled"] = pm["kiln_enabled"] or kiln_enabled
        wall_before = pm.get("wall_s", 0.0)
        results = prev["results"]
        args.out = os.path.dirname(os.path.abspath(args.resume))
        stem = os.path.basename(args.resume)[:-len(".json")]

    base = [sys.executable, os.path.abspath(__file__)]
    passthrough = ["--zoo", args.zoo, "--runtimes", ",".join(worker_runtimes),
                   "--threads", args.threads, "--min-time", str(args.min_time),
                   "--rounds", str(args.rounds), "--warmup", str(args.warmup),
                   "--max-rel", str(args.max_rel),
                   "--max-autotune-models", ",".join(args.max_autotune_models),
                   "--kilnc", shlex.join(args.kilnc_cmd),
                   "--kiln-bench-args", args.kiln_bench_args,
                   "--kiln-check-args", args.kiln_check_args,
                   "--debian-python", args.debian_python]
    if not args.freezing:
        passthrough.append("--no-freezing")
    env = dict(os.environ)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    meta["omp_wait_policy"] = args.omp_wait_policy or "library default"
    for i, entry in enumerate(entries, 1):
        name = entry["name"]
        print(f"[{i}/{len(entries)}] {name} ({entry['suite']}), load "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
            out_json = tf.name
        cmd = base + passthrough + ["--worker", name, "--worker-out", out_json]
        res = {"name": name, "suite": entry["suite"], "gflops": entry.get("gflops"),
               "threads": {}}
        try:
            proc = subprocess.run(cmd, timeout=args.model_timeout, env=env)
            if proc.returncode == 0:
                res = json.load(open(out_json))
            else:
                res.update(status="crashed", note=f"exit code {proc.returncode}")
        except subprocess.TimeoutExpired:
            res.update(status="timeout", note=f"more than {args.model_timeout:.0f} s")
        finally:
            os.unlink(out_json)
        res["worker_s"] = round(time.time() - t0, 1)
        results.append(res)
        results.sort(key=lambda r: zoo_order.get(r["name"], 99))
        run_info["load_end"] = os.getloadavg()
        # Write what we have after every model so a long run leaves results.
        meta["load_end"] = os.getloadavg()
        meta["wall_s"] = wall_before + time.time() - t0
        meta["versions"] = versions(args.kilnc_cmd, "" if kiln_enabled else kiln_note)
        meta["chart"] = write_chart(meta, results, args.out, stem)
        with open(os.path.join(args.out, stem + ".json"), "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        path = write_report(meta, results, args.out, stem)
    if not entries:  # --resume with nothing left: just rewrite the report
        meta["wall_s"] = wall_before
        meta["runs"] = meta["runs"][:-1] if prev else meta["runs"]
        meta["load_end"] = prev["meta"]["load_end"] if prev else os.getloadavg()
        meta["versions"] = versions(args.kilnc_cmd, "" if kiln_enabled else kiln_note)
        meta["chart"] = write_chart(meta, results, args.out, stem)
        path = write_report(meta, results, args.out, stem)
    print(f"peer_bench: wrote {path} in {meta['wall_s'] / 60:.1f} min", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
